/**
 * scripts/check-artifact.mjs, the check every `npm run build:target` ends with: it must
 * pass a right binary and fail each kind of wrong one. Linux: this clone's own binary and
 * copies of it with one thing wrong. macOS and Windows: small Mach-O and PE files made
 * here, one thing wrong in each (no such binary is needed on the machine).
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { platformName } from "../lib/native.ts";

const ROOT = path.join(__dirname, "..");
const SCRIPT = path.join(ROOT, "scripts", "check-artifact.mjs");
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-check-artifact-"));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

/** Writes `bytes` as `exactlock.<platform>.node` in a fresh folder and runs the check on it. */
function check(platform: string, bytes: Buffer): { status: number | null; output: string } {
  const dir = fs.mkdtempSync(path.join(scratch, "case-"));
  const file = path.join(dir, `exactlock.${platform}.node`);
  fs.writeFileSync(file, bytes);
  const run = spawnSync(process.execPath, [SCRIPT, file], { encoding: "utf8" });
  return { status: run.status, output: run.stdout + run.stderr };
}

function failed(output: string): string[] {
  return [...output.matchAll(/^ {2}FAIL {2}(\S+)/gm)].map((m) => m[1]!);
}

// ------------------------------------------------------------------ Mach-O

interface MachOSpec {
  cpu?: number;
  minos?: number;
  dylibs?: readonly string[];
  /** Library ordinal of the one undefined symbol (1 = the first dylib; 0xfe = flat lookup). */
  ordinal?: number;
  exportsEntry?: boolean;
}

const ARM64 = 0x0100000c;
const X86_64 = 0x01000007;
const version = (major: number, minor: number) => (major << 16) | (minor << 8);

/** A minimal 64-bit Mach-O dylib: header, LC_BUILD_VERSION, LC_LOAD_DYLIBs, LC_SYMTAB, symbols. */
function machO(spec: MachOSpec = {}): Buffer {
  const { cpu = ARM64, minos = version(11, 0), dylibs = ["/usr/lib/libSystem.B.dylib"], ordinal = 1 } = spec;
  const commands: Buffer[] = [];
  const build = Buffer.alloc(24);
  build.writeUInt32LE(0x32, 0);
  build.writeUInt32LE(24, 4);
  build.writeUInt32LE(1, 8); // PLATFORM_MACOS
  build.writeUInt32LE(minos, 12);
  build.writeUInt32LE(version(15, 0), 16);
  commands.push(build);
  for (const name of dylibs) {
    const size = Math.ceil((24 + name.length + 1) / 8) * 8;
    const dylib = Buffer.alloc(size);
    dylib.writeUInt32LE(0xc, 0);
    dylib.writeUInt32LE(size, 4);
    dylib.writeUInt32LE(24, 8);
    dylib.write(name, 24, "latin1");
    commands.push(dylib);
  }
  const entry = spec.exportsEntry === false ? "_something_else" : "_napi_register_module_v1";
  const strings = Buffer.from(`\0${entry}\0_kevent\0`, "latin1");
  const symtab = Buffer.alloc(24);
  commands.push(symtab);
  const headerSize = 32 + commands.reduce((sum, c) => sum + c.length, 0);
  const symbols = Buffer.alloc(32);
  symbols.writeUInt32LE(1, 0); // n_strx
  symbols[4] = 0x0f; // N_SECT | N_EXT
  symbols[5] = 1;
  symbols.writeUInt32LE(2 + entry.length, 16);
  symbols[20] = 0x01; // N_UNDF | N_EXT
  symbols.writeUInt16LE(ordinal << 8, 22);
  symtab.writeUInt32LE(0x2, 0);
  symtab.writeUInt32LE(24, 4);
  symtab.writeUInt32LE(headerSize, 8);
  symtab.writeUInt32LE(2, 12);
  symtab.writeUInt32LE(headerSize + symbols.length, 16);
  symtab.writeUInt32LE(strings.length, 20);
  const header = Buffer.alloc(32);
  header.writeUInt32LE(0xfeedfacf, 0);
  header.writeUInt32LE(cpu, 4);
  header.writeUInt32LE(6, 12); // MH_DYLIB
  header.writeUInt32LE(commands.length, 16);
  header.writeUInt32LE(headerSize - 32, 20);
  header.writeUInt32LE(0x85, 24); // MH_NOUNDEFS | MH_DYLDLINK | MH_TWOLEVEL
  return Buffer.concat([header, ...commands, symbols, strings]);
}

describe("a Mach-O binary", () => {
  it("passes when it is a dylib of the target's CPU, for its macOS floor, bound to libSystem", () => {
    const arm = check("darwin-arm64", machO());
    expect(arm.status, arm.output).toBe(0);
    expect(arm.output).toMatch(/minimum macOS\s+11\.0 \(LC_BUILD_VERSION/);
    const x64 = check("darwin-x64", machO({ cpu: X86_64, minos: version(10, 13) }));
    expect(x64.status, x64.output).toBe(0);
  });

  it.each([
    ["a minimum macOS above the floor (zig's default 15.0)", "darwin-arm64", { minos: version(15, 0) }, "minimum"],
    ["the other CPU", "darwin-x64", { minos: version(10, 13) }, "architecture"],
    ["a library outside the system's", "darwin-arm64", { dylibs: ["/usr/lib/libSystem.B.dylib", "/opt/homebrew/lib/libssl.3.dylib"] }, "libraries"],
    ["a symbol left to a flat lookup at load time", "darwin-arm64", { ordinal: 0xfe }, "symbol"],
    ["no napi entry point", "darwin-arm64", { exportsEntry: false }, "entry"],
  ] as const)("fails with %s", (_, platform, spec, what) => {
    const result = check(platform, machO(spec));
    expect(result.status, result.output).toBe(1);
    expect(failed(result.output)).toEqual([what]);
  });

  it("fails for an ELF file named as a macOS binary", () => {
    const elf = Buffer.alloc(64);
    elf.writeUInt32BE(0x7f454c46, 0);
    expect(failed(check("darwin-arm64", elf).output)).toEqual(["format"]);
  });
});

// ---------------------------------------------------------------------- PE

interface PeSpec {
  machine?: number;
  dll?: boolean;
  imports?: readonly string[];
  exportsEntry?: boolean;
}

const AMD64 = 0x8664;
const PE_ARM64 = 0xaa64;

/** A minimal PE32+ file: DOS stub, COFF and optional headers, one section holding the export and import tables. */
function pe(spec: PeSpec = {}): Buffer {
  const { machine = AMD64, dll = true, imports = ["KERNEL32.dll", "ntdll.dll", "api-ms-win-core-synch-l1-2-0.dll"] } = spec;
  const [peAt, optionalSize, sectionRva, sectionRaw, sectionSize] = [0x40, 112 + 16 * 8, 0x1000, 0x400, 0x800];
  const file = Buffer.alloc(sectionRaw + sectionSize);
  file.write("MZ", 0, "latin1");
  file.writeUInt32LE(peAt, 0x3c);
  file.writeUInt32LE(0x00004550, peAt); // "PE\0\0"
  const coff = peAt + 4;
  file.writeUInt16LE(machine, coff);
  file.writeUInt16LE(1, coff + 2); // one section
  file.writeUInt16LE(optionalSize, coff + 16);
  file.writeUInt16LE(0x0022 | (dll ? 0x2000 : 0), coff + 18); // EXECUTABLE_IMAGE | LARGE_ADDRESS_AWARE | DLL
  const optional = coff + 20;
  file.writeUInt16LE(0x20b, optional);
  file.writeUInt32LE(16, optional + 108);
  const section = optional + optionalSize;
  file.write(".rdata", section, "latin1");
  file.writeUInt32LE(sectionSize, section + 8);
  file.writeUInt32LE(sectionRva, section + 12);
  file.writeUInt32LE(sectionSize, section + 16);
  file.writeUInt32LE(sectionRaw, section + 20);
  const at = (offset: number) => sectionRaw + offset;
  const rva = (offset: number) => sectionRva + offset;
  // The export directory at 0, its one name's pointer at 0x40, the name at 0x60.
  file.writeUInt32LE(rva(0), optional + 112);
  file.writeUInt32LE(40, optional + 116);
  file.writeUInt32LE(1, at(24));
  file.writeUInt32LE(rva(0x40), at(32));
  file.writeUInt32LE(rva(0x60), at(0x40));
  file.write(spec.exportsEntry === false ? "something_else" : "napi_register_module_v1", at(0x60), "latin1");
  // The import descriptors at 0x100 (then a zero one), each DLL's name from 0x300.
  file.writeUInt32LE(rva(0x100), optional + 120);
  file.writeUInt32LE(20 * (imports.length + 1), optional + 124);
  imports.forEach((name, i) => {
    file.writeUInt32LE(rva(0x300 + i * 48), at(0x100 + i * 20 + 12));
    file.write(name, at(0x300 + i * 48), "latin1");
  });
  return file;
}

describe("a Windows binary", () => {
  it("passes when it is a DLL of the target's CPU that imports only system DLLs", () => {
    const x64 = check("win32-x64-msvc", pe());
    expect(x64.status, x64.output).toBe(0);
    expect(x64.output).toMatch(/imports KERNEL32\.dll, ntdll\.dll, api-ms-win-core-synch-l1-2-0\.dll/);
    const arm = check("win32-arm64-msvc", pe({ machine: PE_ARM64, imports: ["kernel32.dll", "ucrtbase.dll"] }));
    expect(arm.status, arm.output).toBe(0);
  });

  it.each([
    ["the other CPU", "win32-arm64-msvc", {}, "architecture"],
    ["an executable, not a DLL", "win32-x64-msvc", { dll: false }, "format"],
    ["the Visual C++ runtime (a build without +crt-static)", "win32-x64-msvc", { imports: ["KERNEL32.dll", "VCRUNTIME140.dll"] }, "libraries"],
    ["a MinGW runtime DLL", "win32-x64-msvc", { imports: ["KERNEL32.dll", "libgcc_s_seh-1.dll"] }, "libraries"],
    ["node.exe (it would not load in Bun or Electron)", "win32-x64-msvc", { imports: ["KERNEL32.dll", "node.exe"] }, "libraries"],
    ["no napi entry point", "win32-x64-msvc", { exportsEntry: false }, "entry"],
  ] as const)("fails with %s", (_, platform, spec, what) => {
    const result = check(platform, pe(spec));
    expect(result.status, result.output).toBe(1);
    expect(failed(result.output)).toEqual([what]);
  });

  it("fails, and says so, for a PE file cut short", () => {
    const cut = check("win32-x64-msvc", pe().subarray(0, 0x90)); // inside the optional header
    expect(cut.status, cut.output).toBe(1);
    expect(failed(cut.output)).toEqual(["format"]);
    expect(cut.output).toContain("a truncated or malformed PE file");
  });

  it("fails for a Mach-O file named as a Windows binary", () => {
    expect(failed(check("win32-x64-msvc", machO()).output)).toEqual(["format"]);
  });
});

// --------------------------------------------------------------------- ELF

const host = path.join(ROOT, "native", `exactlock.${platformName()}.node`);
const buildInfo = path.join(ROOT, "native", "build.json");
const zigBuilt =
  fs.existsSync(buildInfo) && (JSON.parse(fs.readFileSync(buildInfo, "utf8")) as { toolchain?: string }).toolchain === "zig";

describe.runIf(platformName().endsWith("-gnu") && fs.existsSync(host))("this clone's Linux binary", () => {
  const bytes = fs.readFileSync(host);
  const arch = platformName().includes("x64") ? "x64" : "arm64";
  const other = arch === "x64" ? "arm64" : "x64";

  it.runIf(zigBuilt)("passes as built (zig, glibc 2.17)", () => {
    const result = check(platformName(), bytes);
    expect(result.status, result.output).toBe(0);
    expect(result.output).toMatch(/glibc floor\s+newest GLIBC_ version needed: 2\.17/);
  });

  it.runIf(zigBuilt)("fails when it asks for a newer glibc", () => {
    const newer = Buffer.from(bytes);
    const at = newer.indexOf("GLIBC_2.17\0", 0, "latin1");
    expect(at).toBeGreaterThan(0);
    newer.write("GLIBC_2.34", at, "latin1");
    expect(failed(check(platformName(), newer).output)).toEqual(["glibc"]);
  });

  it("fails named as the other CPU's binary, and as a musl one", () => {
    expect(failed(check(`linux-${other}-gnu`, bytes).output)).toContain("architecture");
    expect(failed(check(`linux-${arch}-musl`, bytes).output)).toEqual(expect.arrayContaining(["libraries", "C"]));
  });
});
