#!/usr/bin/env node
// Checks a built `.node` against what its target must be, reading the file itself
// (no readelf, otool or llvm-objdump needed, so it runs on any machine and for any target):
//
//   ELF (Linux)    64-bit little-endian shared object, the target's machine, exports
//                  napi_register_module_v1, needs only the C library's own objects
//                  (gnu: libc/libm/libpthread/libdl/librt/libgcc_s and the loader; musl:
//                  libc.so), and for gnu asks for no glibc symbol version above 2.17
//                  (for musl: none at all)
//   Mach-O (macOS) 64-bit thin dylib of the target's CPU, exports _napi_register_module_v1,
//                  a minimum macOS (LC_BUILD_VERSION or LC_VERSION_MIN_MACOSX) no newer
//                  than the target's floor, loads only system libraries from /usr/lib,
//                  no run-path, and binds every undefined symbol to one of them (none
//                  left for a flat lookup at load time, which `-undefined dynamic_lookup`
//                  would otherwise let through silently)
//   PE (Windows)   PE32+ DLL of the target's CPU, exports napi_register_module_v1, and
//                  imports only DLLs every Windows 10 has (kernel32, ntdll, the api-ms-win-*
//                  sets, ...): no C runtime to install (vcruntime140 means the build lacked
//                  +crt-static), no MinGW runtime DLL, and no node.exe (napi finds its
//                  functions in whatever process loaded it, so Bun and Electron load it too)
//
//   node scripts/check-artifact.mjs [--all] [FILE | TRIPLE | PLATFORM]...
//
// With no FILE, every native/exactlock.<platform>.node present is checked; --all also
// fails for a shipped target whose binary is missing. Exits 1 if anything fails.
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { BINARY_NAME, GLIBC_FLOOR, binaryPath, findTarget, shippedTargets } from "./targets.mjs";

// ------------------------------------------------------------------------- ELF

const ELF_MACHINES = { 62: "x86_64", 183: "aarch64" }; // EM_X86_64, EM_AARCH64
const ET_DYN = 3;
const SHT_DYNAMIC = 6;
const SHT_DYNSYM = 11;
const SHT_GNU_VERNEED = 0x6ffffffe;
const DT_NEEDED = 1;
/** The shared objects a Linux binary may need: the C library's own (and the unwinder). */
const ELF_ALLOWED = {
  gnu: {
    x86_64: ["libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libgcc_s.so.1", "ld-linux-x86-64.so.2"],
    aarch64: ["libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libgcc_s.so.1", "ld-linux-aarch64.so.1"],
  },
  // musl's loader answers to `libc.so` for every libc object.
  musl: { x86_64: ["libc.so"], aarch64: ["libc.so"] },
};

function cString(buffer, offset) {
  const end = buffer.indexOf(0, offset);
  return buffer.toString("latin1", offset, end === -1 ? buffer.length : end);
}

function versionKey(version) {
  return version.split(".").map(Number);
}

/** Whether dotted version `a` is newer than `b` (numerically: 2.34 > 2.4). */
export function isNewer(a, b) {
  const [x, y] = [versionKey(a), versionKey(b)];
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) > (y[i] ?? 0);
  }
  return false;
}

function readElf(buffer) {
  if (buffer[4] !== 2 || buffer[5] !== 1) return { error: "not a 64-bit little-endian ELF" };
  const u16 = (at) => buffer.readUInt16LE(at);
  const u32 = (at) => buffer.readUInt32LE(at);
  const u64 = (at) => Number(buffer.readBigUInt64LE(at));
  const sections = [];
  const [shoff, shentsize, shnum] = [u64(40), u16(58), u16(60)];
  for (let i = 0; i < shnum; i++) {
    const at = shoff + i * shentsize;
    sections.push({ type: u32(at + 4), offset: u64(at + 24), size: u64(at + 32), link: u32(at + 40), info: u32(at + 44) });
  }
  const stringAt = (section, offset) => cString(buffer, sections[section.link].offset + offset);
  const needed = [];
  const versions = [];
  let exportsEntry = false;
  for (const section of sections) {
    if (section.type === SHT_DYNAMIC) {
      for (let at = section.offset; at < section.offset + section.size; at += 16) {
        if (buffer.readBigInt64LE(at) === BigInt(DT_NEEDED)) needed.push(stringAt(section, u64(at + 8)));
      }
    } else if (section.type === SHT_GNU_VERNEED) {
      // Elf64_Verneed { vn_version, vn_cnt, vn_file, vn_aux, vn_next }, each with
      // vn_cnt Elf64_Vernaux { vna_hash, vna_flags, vna_other, vna_name, vna_next }.
      let need = section.offset;
      for (let i = 0; i < section.info; i++) {
        const file = stringAt(section, u32(need + 4));
        let aux = need + u32(need + 8);
        for (let j = 0; j < u16(need + 2); j++) {
          versions.push({ file, name: stringAt(section, u32(aux + 8)) });
          aux += u32(aux + 12);
        }
        need += u32(need + 12);
      }
    } else if (section.type === SHT_DYNSYM) {
      // Elf64_Sym { st_name u32, st_info u8, st_other u8, st_shndx u16, st_value, st_size }
      for (let at = section.offset; at < section.offset + section.size; at += 24) {
        const defined = u16(at + 6) !== 0;
        if (defined && stringAt(section, u32(at)) === "napi_register_module_v1") exportsEntry = true;
      }
    }
  }
  return { type: u16(16), machine: ELF_MACHINES[u16(18)] ?? `e_machine ${u16(18)}`, needed, versions, exportsEntry };
}

function checkElf(buffer, target, check) {
  const elf = readElf(buffer);
  if (elf.error) return check("format", false, elf.error);
  check("format", elf.type === ET_DYN, `ELF 64-bit LSB, e_type ${elf.type === ET_DYN ? "ET_DYN (shared object)" : elf.type}`);
  check("architecture", elf.machine === target.arch, `${elf.machine} (want ${target.arch})`);
  check("entry point", elf.exportsEntry, "napi_register_module_v1 exported");
  const allowed = ELF_ALLOWED[target.libc][target.arch];
  const unexpected = elf.needed.filter((name) => !allowed.includes(name));
  check(
    "libraries",
    elf.needed.length > 0 && unexpected.length === 0,
    `NEEDED ${elf.needed.join(", ") || "(none)"}${unexpected.length ? `; unexpected: ${unexpected.join(", ")}` : ""}`,
  );
  const glibc = [...new Set(elf.versions.map((v) => v.name).filter((name) => name.startsWith("GLIBC_")))]
    .map((name) => name.slice("GLIBC_".length))
    .filter((version) => /^[0-9.]+$/.test(version))
    .sort((a, b) => (isNewer(a, b) ? 1 : isNewer(b, a) ? -1 : 0));
  if (target.libc === "gnu") {
    const newest = glibc.at(-1);
    check(
      "glibc floor",
      newest !== undefined && !isNewer(newest, GLIBC_FLOOR),
      `newest GLIBC_ version needed: ${newest ?? "(none)"} (must be ≤ ${GLIBC_FLOOR})`,
    );
  } else {
    check("C library", glibc.length === 0, glibc.length ? `asks for glibc ${glibc.at(-1)}: not a musl binary` : "musl: no glibc symbol versions");
  }
}

// ---------------------------------------------------------------------- Mach-O

const MH_MAGIC_64 = 0xfeedfacf;
const FAT_MAGIC = 0xcafebabe;
const MH_DYLIB = 6;
const MH_BUNDLE = 8;
const MH_TWOLEVEL = 0x80;
const CPU_TYPES = { 0x01000007: "x86_64", 0x0100000c: "aarch64" };
const LC = {
  SYMTAB: 0x2,
  LOAD_DYLIB: 0xc,
  ID_DYLIB: 0xd,
  LOAD_DYLINKER: 0xe,
  LAZY_LOAD_DYLIB: 0x20,
  VERSION_MIN_MACOSX: 0x24,
  BUILD_VERSION: 0x32,
  LOAD_WEAK_DYLIB: 0x80000018,
  RPATH: 0x8000001c,
  REEXPORT_DYLIB: 0x8000001f,
  LOAD_UPWARD_DYLIB: 0x80000023,
};
const DYLIB_LOADS = [LC.LOAD_DYLIB, LC.LOAD_WEAK_DYLIB, LC.REEXPORT_DYLIB, LC.LAZY_LOAD_DYLIB, LC.LOAD_UPWARD_DYLIB];
const PLATFORM_MACOS = 1;
const DYNAMIC_LOOKUP_ORDINAL = 0xfe;
/** The libraries a macOS binary may load: the system's (Rust's std links libiconv). */
const MACHO_ALLOWED = ["/usr/lib/libSystem.B.dylib", "/usr/lib/libiconv.2.dylib", "/usr/lib/libcharset.1.dylib"];

/** `xxxx.yy.zz` nibbles as Mach-O encodes versions. */
function machoVersion(value) {
  const [major, minor, patch] = [value >>> 16, (value >>> 8) & 0xff, value & 0xff];
  return patch ? `${major}.${minor}.${patch}` : `${major}.${minor}`;
}

function readMachO(buffer) {
  const u32 = (at) => buffer.readUInt32LE(at);
  const macho = { cpu: CPU_TYPES[u32(4)] ?? `cputype 0x${u32(4).toString(16)}`, filetype: u32(12), flags: u32(24) };
  macho.dylibs = [];
  macho.rpaths = [];
  macho.commands = [];
  let at = 32;
  for (let i = 0; i < u32(16); i++) {
    const [cmd, size] = [u32(at), u32(at + 4)];
    macho.commands.push(cmd);
    if (cmd === LC.BUILD_VERSION) {
      macho.minos = { platform: u32(at + 8), version: machoVersion(u32(at + 12)), sdk: machoVersion(u32(at + 16)), via: "LC_BUILD_VERSION" };
    } else if (cmd === LC.VERSION_MIN_MACOSX) {
      macho.minos = { platform: PLATFORM_MACOS, version: machoVersion(u32(at + 8)), sdk: machoVersion(u32(at + 12)), via: "LC_VERSION_MIN_MACOSX" };
    } else if (DYLIB_LOADS.includes(cmd)) {
      macho.dylibs.push(cString(buffer, at + u32(at + 8)));
    } else if (cmd === LC.ID_DYLIB) {
      macho.installName = cString(buffer, at + u32(at + 8));
    } else if (cmd === LC.RPATH) {
      macho.rpaths.push(cString(buffer, at + u32(at + 8)));
    } else if (cmd === LC.SYMTAB) {
      macho.symtab = { symoff: u32(at + 8), nsyms: u32(at + 12), stroff: u32(at + 16) };
    }
    at += size;
  }
  macho.exportsEntry = false;
  macho.flatLookups = [];
  if (macho.symtab) {
    // nlist_64 { n_strx u32, n_type u8, n_sect u8, n_desc u16, n_value u64 }
    const { symoff, nsyms, stroff } = macho.symtab;
    for (let i = 0; i < nsyms; i++) {
      const entry = symoff + i * 16;
      const [type, desc] = [buffer[entry + 4], buffer.readUInt16LE(entry + 6)];
      if (type & 0xe0) continue; // a debugging (stab) entry
      const name = cString(buffer, stroff + u32(entry));
      const external = (type & 0x01) !== 0;
      const kind = type & 0x0e; // N_UNDF 0x0, N_SECT 0xe
      if (external && kind === 0x0e && name === "_napi_register_module_v1") macho.exportsEntry = true;
      if (external && kind === 0x0 && ((desc >> 8) & 0xff) === DYNAMIC_LOOKUP_ORDINAL) macho.flatLookups.push(name);
    }
  }
  return macho;
}

function checkMachO(buffer, target, check) {
  const magic = buffer.readUInt32LE(0);
  if (buffer.readUInt32BE(0) === FAT_MAGIC) return check("format", false, "a universal (fat) binary: one thin binary per package is expected");
  if (magic !== MH_MAGIC_64) return check("format", false, "not a 64-bit little-endian Mach-O");
  const macho = readMachO(buffer);
  const kind = { [MH_DYLIB]: "MH_DYLIB", [MH_BUNDLE]: "MH_BUNDLE" }[macho.filetype];
  check("format", kind !== undefined, `Mach-O 64-bit ${kind ?? `filetype ${macho.filetype}`}${macho.flags & MH_TWOLEVEL ? ", two-level namespace" : ""}`);
  check("architecture", macho.cpu === target.arch, `${macho.cpu} (want ${target.arch})`);
  check("entry point", macho.exportsEntry, "_napi_register_module_v1 exported");
  const minos = macho.minos;
  check(
    "minimum macOS",
    minos !== undefined && minos.platform === PLATFORM_MACOS && !isNewer(minos.version, target.macosMin),
    minos
      ? `${minos.version} (${minos.via}, platform ${minos.platform === PLATFORM_MACOS ? "macos" : minos.platform}, sdk ${minos.sdk}; must be ≤ ${target.macosMin})`
      : "no LC_BUILD_VERSION or LC_VERSION_MIN_MACOSX",
  );
  const unexpected = macho.dylibs.filter((name) => !MACHO_ALLOWED.includes(name));
  check(
    "libraries",
    macho.dylibs.includes(MACHO_ALLOWED[0]) && unexpected.length === 0 && macho.rpaths.length === 0,
    `loads ${macho.dylibs.join(", ")}` +
      (unexpected.length ? `; unexpected: ${unexpected.join(", ")}` : "") +
      (macho.rpaths.length ? `; LC_RPATH ${macho.rpaths.join(", ")}` : ""),
  );
  check(
    "symbol binding",
    macho.symtab !== undefined && macho.flatLookups.length === 0,
    macho.flatLookups.length
      ? `left to a flat lookup at load time (the link found them in no library): ${macho.flatLookups.slice(0, 8).join(", ")}`
      : "every undefined symbol is bound to a loaded library",
  );
  if (macho.installName) check("install name", true, `${macho.installName} (informational: the loader opens the file by path)`);
  if (macho.commands.includes(LC.LOAD_DYLINKER)) check("dylinker", true, "LC_LOAD_DYLINKER present (zig writes it in dylibs; informational)");
}

// -------------------------------------------------------------------------- PE

const PE_MACHINES = { 0x8664: "x86_64", 0xaa64: "aarch64" }; // IMAGE_FILE_MACHINE_AMD64, _ARM64
const IMAGE_FILE_DLL = 0x2000;
const PE32_PLUS = 0x20b;
/**
 * The DLLs a Windows binary may import: ones every Windows 10 and later ships in System32
 * (Rust's std takes randomness from bcryptprimitives' ProcessPrng, Windows 10+). msvcrt.dll
 * (x64 MinGW) and ucrtbase.dll (arm64 LLVM MinGW, the Universal CRT of Windows 10+) are the
 * C runtimes of the builds made on Linux, both part of Windows; the MSVC build links its runtime in.
 */
const PE_SYSTEM_DLLS = [
  "kernel32.dll", "ntdll.dll", "advapi32.dll", "bcrypt.dll", "bcryptprimitives.dll", "userenv.dll", "ws2_32.dll", "msvcrt.dll", "ucrtbase.dll",
];
const PE_SYSTEM_SETS = /^api-ms-win-core-[a-z0-9-]+\.dll$/;

function readPe(buffer) {
  const header = buffer.readUInt32LE(0x3c); // e_lfanew
  if (buffer.toString("latin1", 0, 2) !== "MZ" || header + 24 > buffer.length || buffer.readUInt32LE(header) !== 0x00004550) {
    return { error: "not a PE file (no MZ header or PE signature)" };
  }
  const coff = header + 4;
  const [machine, sectionCount, optionalSize, characteristics] = [
    buffer.readUInt16LE(coff),
    buffer.readUInt16LE(coff + 2),
    buffer.readUInt16LE(coff + 16),
    buffer.readUInt16LE(coff + 18),
  ];
  const optional = coff + 20;
  const magic = buffer.readUInt16LE(optional);
  if (magic !== PE32_PLUS) return { error: `optional header magic 0x${magic.toString(16)}: not PE32+ (64-bit)` };
  // IMAGE_OPTIONAL_HEADER64: NumberOfRvaAndSizes at 108, the data directories from 112.
  const directory = (index) => ({ rva: buffer.readUInt32LE(optional + 112 + index * 8), size: buffer.readUInt32LE(optional + 116 + index * 8) });
  const sections = [];
  for (let i = 0, at = optional + optionalSize; i < sectionCount; i++, at += 40) {
    sections.push({ rva: buffer.readUInt32LE(at + 12), size: Math.max(buffer.readUInt32LE(at + 8), buffer.readUInt32LE(at + 16)), raw: buffer.readUInt32LE(at + 20) });
  }
  const offset = (rva) => {
    const section = sections.find((s) => rva >= s.rva && rva < s.rva + s.size);
    return section ? rva - section.rva + section.raw : -1;
  };
  const nameAt = (rva) => (offset(rva) >= 0 ? cString(buffer, offset(rva)).slice(0, 256) : `(a name at RVA 0x${rva.toString(16)}, in no section)`);
  const exports = [];
  const exportDir = directory(0);
  if (exportDir.size > 0 && offset(exportDir.rva) >= 0) {
    // IMAGE_EXPORT_DIRECTORY: NumberOfNames at 24, AddressOfNames at 32.
    const at = offset(exportDir.rva);
    const [count, names] = [buffer.readUInt32LE(at + 24), offset(buffer.readUInt32LE(at + 32))];
    for (let i = 0; i < count && names >= 0; i++) exports.push(nameAt(buffer.readUInt32LE(names + i * 4)));
  }
  const imports = [];
  // The import table (1) and the delay-load table (13): both name DLLs the loader must find.
  for (const [index, entrySize, nameField] of [[1, 20, 12], [13, 32, 4]]) {
    const table = directory(index);
    if (table.size === 0 || offset(table.rva) < 0) continue;
    for (let at = offset(table.rva); at + entrySize <= buffer.length; at += entrySize) {
      const name = buffer.readUInt32LE(at + nameField);
      if (name === 0) break;
      imports.push(nameAt(name));
    }
  }
  return { machine: PE_MACHINES[machine] ?? `machine 0x${machine.toString(16)}`, dll: (characteristics & IMAGE_FILE_DLL) !== 0, exports, imports };
}

function checkPe(buffer, target, check) {
  let pe;
  try {
    pe = readPe(buffer);
  } catch (error) {
    return check("format", false, `a truncated or malformed PE file (${error.message})`);
  }
  if (pe.error) return check("format", false, pe.error);
  check("format", pe.dll, `PE32+ ${pe.dll ? "DLL" : "executable, not a DLL"}`);
  check("architecture", pe.machine === target.arch, `${pe.machine} (want ${target.arch})`);
  check("entry point", pe.exports.includes("napi_register_module_v1"), "napi_register_module_v1 exported");
  const unexpected = pe.imports.filter((name) => !PE_SYSTEM_DLLS.includes(name.toLowerCase()) && !PE_SYSTEM_SETS.test(name.toLowerCase()));
  check(
    "libraries",
    pe.imports.some((name) => name.toLowerCase() === "kernel32.dll") && unexpected.length === 0,
    `imports ${pe.imports.join(", ") || "(none)"}${unexpected.length ? `; not a system DLL: ${unexpected.join(", ")}` : ""}`,
  );
}

// ------------------------------------------------------------------------- API

/** Checks `file` against `target` (a row of scripts/targets.mjs): `{ file, target, ok, checks }`. */
export function checkArtifact(file, target) {
  const checks = [];
  const check = (name, ok, detail) => checks.push({ name, ok: Boolean(ok), detail });
  if (!fs.existsSync(file)) {
    check("present", false, "missing");
  } else {
    const buffer = fs.readFileSync(file);
    check("file", path.basename(file) === `${BINARY_NAME}.${target.platform}.node`, `${path.basename(file)}, ${buffer.length} bytes`);
    if (buffer.length < 64) check("format", false, "too short for an executable header");
    else if (buffer.readUInt32BE(0) === 0x7f454c46) {
      if (target.os === "linux") checkElf(buffer, target, check);
      else check("format", false, `an ELF file, but ${target.triple} needs ${target.os === "win32" ? "PE" : "Mach-O"}`);
    } else if (target.os === "darwin") checkMachO(buffer, target, check);
    else if (target.os === "win32") checkPe(buffer, target, check);
    else check("format", false, `not an ELF file (${target.triple} needs one)`);
  }
  return { file, target, ok: checks.every((c) => c.ok), checks };
}

export function printReport({ file, target, ok, checks }) {
  console.log(`${ok ? "PASS" : "FAIL"}  ${path.relative(process.cwd(), file) || file}  (${target.triple})`);
  for (const { name, ok: passed, detail } of checks) console.log(`  ${passed ? "ok  " : "FAIL"}  ${name.padEnd(14)} ${detail}`);
}

function main(argv) {
  const all = argv.includes("--all");
  const names = argv.filter((arg) => !arg.startsWith("--"));
  const jobs = [];
  for (const name of names) {
    const target = findTarget(name) ?? findTarget(path.basename(name).replace(/^[^.]+\.|\.node$/g, ""));
    if (!target) {
      console.error(`check-artifact: ${name} names no shipped target (file names are ${BINARY_NAME}.<platform>.node)`);
      process.exit(2);
    }
    jobs.push({ file: findTarget(name) ? binaryPath(target) : path.resolve(name), target });
  }
  if (names.length === 0) {
    for (const target of shippedTargets()) {
      if (all || fs.existsSync(binaryPath(target))) jobs.push({ file: binaryPath(target), target });
    }
  }
  if (jobs.length === 0) {
    console.error("check-artifact: no binary in native/ (build one: npm run build:target -- TRIPLE)");
    process.exit(1);
  }
  const reports = jobs.map(({ file, target }) => checkArtifact(file, target));
  reports.forEach(printReport);
  const failed = reports.filter((report) => !report.ok);
  console.log(`${reports.length - failed.length} of ${reports.length} binaries pass`);
  process.exit(failed.length === 0 ? 0 : 1);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
