/**
 * The matrix's mounts and daemons go when the process that made them is
 * stopped by a signal (a CI step's timeout, Ctrl-C), not only when it exits:
 * a SIGTERM to the vitest workers once left two sshfs mounts and their sshd
 * running (./mounts.mjs undoes them, then dies of the same signal).
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { expect, it } from "vitest";
import { type FsKind, isMountPoint, whyNotMountable } from "./mounts.mjs";

const MOUNTS = path.join(__dirname, "mounts.mjs");

/** Whether process `pid` exists (a zombie counts as gone: it runs nothing). */
function running(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
}

it.each(["SIGTERM", "SIGINT"] as const)("%s to the process that mounted undoes its mounts, its sshd and its temp dir", async (signal) => {
  // ext4 (the temp dir) always; the real mounts where this machine can make them (root).
  const kinds = (["ext4", "tmpfs", "sshfs"] as FsKind[]).filter((kind) => whyNotMountable(kind) === undefined);
  const script = `
    import { baseDir, mountFs } from ${JSON.stringify(MOUNTS)};
    const mounts = [];
    for (const kind of ${JSON.stringify(kinds)}) mounts.push(await mountFs(kind));
    const sshd = mounts.find((m) => m.sshd)?.sshd.pid ?? null;
    console.log(JSON.stringify({ base: baseDir(), dirs: mounts.filter((m) => m.kind !== "ext4").map((m) => m.dir), sshd }));
    setInterval(() => {}, 1 << 30);
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_code, sig) => resolve(sig)));
  const line = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
      if (out.includes("\n")) resolve(out.split("\n")[0]);
    });
    child.once("exit", (code, sig) => reject(new Error(`the mounting child exited (${sig ?? code}) before it reported`)));
  });
  const made: { base: string; dirs: string[]; sshd: number | null } = JSON.parse(line);
  for (const dir of made.dirs) expect(isMountPoint(dir), dir).toBe(true);
  if (made.sshd !== null) expect(running(made.sshd)).toBe(true);

  child.kill(signal);
  expect(await exited).toBe(signal);

  for (const dir of made.dirs) expect(isMountPoint(dir), dir).toBe(false);
  expect(fs.existsSync(made.base)).toBe(false);
  if (made.sshd !== null) {
    // SIGKILLed by the child; reaped by whoever inherits it.
    const deadline = Date.now() + 5_000;
    while (running(made.sshd) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(running(made.sshd)).toBe(false);
  }
}, 60_000);
