/**
 * `exactlock doctor DIR`, driven as a user would: the real command in a
 * child process, probing real filesystems (the temp dir, /dev/shm, tmpfs
 * mounts made for the occasion, one read-only, and an sshfs mount of a
 * local sshd), and `probeFilesystem` itself.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { acquireLock, probeFilesystem } from "../lib/index.ts";
import { makeTempDir, removeDir, ROOT, runCli } from "./cli-helpers.ts";
import { PORTABLE } from "./helpers.ts";
import { deadPid } from "./fixtures/children.ts";
import { dirWithInfo, legacyRecordBytes } from "./kernel-helpers.ts";
import { skipUnless } from "./premises.ts";

let dir: string;

beforeEach(() => {
  dir = makeTempDir("doctor");
});

afterEach(() => {
  removeDir(dir);
});

/** The one-line summary of a local filesystem that carries every call. */
const LOCAL_LINE = (at: string, fsType: string) =>
  `${at}: ${fsType} (local) noreplace=yes exchange=yes flock=yes inotify=all_changes`;

/** The mounted type of `at`, as findmnt(8) reads it (independent of the probe). */
function findmntType(at: string): string {
  const found = spawnSync("findmnt", ["-n", "-o", "FSTYPE", "-T", at], { encoding: "utf8" });
  if (found.status !== 0) throw new Error(`findmnt failed: ${found.stderr}`);
  return found.stdout.trim();
}

/** Mounts a small tmpfs (`ro` or `rw`) in the test's dir, runs `body` on it, unmounts whatever happens. */
async function withTmpfs(mode: "ro" | "rw", body: (mountPoint: string) => Promise<void>): Promise<void> {
  const mountPoint = path.join(dir, `tmpfs-${mode}`);
  mkdirSync(mountPoint);
  const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", `${mode},size=1m`, "tmpfs", mountPoint], { encoding: "utf8" });
  // As root with mount(8) present, a failing mount is a failure of the test, not a reason to skip.
  if (mounted.status !== 0) throw new Error(`cannot mount a tmpfs: ${mounted.stderr.trim()}`);
  try {
    await body(mountPoint);
  } finally {
    if (spawnSync("umount", [mountPoint]).status !== 0) spawnSync("umount", ["-l", mountPoint]);
  }
}

describe("exactlock doctor", () => {
  it("--line prints one summary line for the temp dir, and leaves nothing in it", async (ctx) => {
    skipUnless(ctx, { linux: true }); // the expected line is Linux's (findmnt, inotify)
    const result = await runCli(["doctor", "--line", dir]);
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    expect(result.stdout).toBe(`${LOCAL_LINE(dir, findmntType(dir))}\n`);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("prints the summary first, then each call and what follows for the lock", async (ctx) => {
    skipUnless(ctx, { linux: true }); // the expected line is Linux's (findmnt, inotify)
    const result = await runCli(["doctor", dir]);
    expect(result.status).toBe(0);
    const lines = result.stdout.split("\n");
    expect(lines[0]).toBe(LOCAL_LINE(dir, findmntType(dir)));
    expect(result.stdout).toMatch(/^ {2}RENAME_NOREPLACE +yes: /m);
    expect(result.stdout).toMatch(/^ {2}RENAME_EXCHANGE +yes: /m);
    expect(result.stdout).toMatch(/^ {2}flock +yes: /m);
    expect(result.stdout).toMatch(/^ {2}class +local: every writer is on this host$/m);
    expect(result.stdout).toContain("what follows for a lock here:");
    expect(result.stdout).toMatch(/a release wakes waiters at once .*\[wake_prompt\]$/m);
    expect(result.stdout).not.toContain("ownerHostId");
  });

  it("--json: /dev/shm is tmpfs, local, carries every call, and says locks there are in memory", async (ctx) => {
    skipUnless(ctx, { linux: true }); // /dev/shm, findmnt
    const result = await runCli(["doctor", "--json", "/dev/shm", dir]);
    expect(result.status).toBe(0);
    const [shm, temp] = JSON.parse(result.stdout) as Array<Record<string, any>>;
    expect(shm).toMatchObject({
      ok: true,
      dir: "/dev/shm",
      summary: LOCAL_LINE("/dev/shm", "tmpfs"),
      fsType: "tmpfs",
      statfsName: "tmpfs",
      statfsType: "0x1021994",
      class: "local",
      mountPoint: "/dev/shm",
      renameNoreplace: { result: "yes" },
      renameExchange: { result: "yes" },
      flock: { result: "yes" },
      inotify: { result: "all_changes" },
    });
    expect(shm!.notes.map((note: { code: string }) => note.code)).toEqual([
      "publish_atomic",
      "reclaim_exchange",
      "flock_excludes",
      "wake_prompt",
      "memory_only",
    ]);
    expect(temp!.fsType).toBe(findmntType(dir));
    expect(temp!.dev).toMatch(/^\d+$/);
  });

  it("names a missing directory, a file and a path below a file, with a code and a next step, and exits 1", async (ctx) => {
    skipUnless(ctx, { linux: true }); // the expected line is Linux's (findmnt, inotify)
    const file = path.join(dir, "file");
    writeFileSync(file, "x");
    const result = await runCli(["doctor", path.join(dir, "nope"), file, path.join(file, "below"), dir]);
    expect(result.status).toBe(1);
    const errors = result.stderr.trim().split("\n");
    expect(errors).toEqual([
      `exactlock doctor: ${dir}/nope does not exist (ENOENT) [not_found]. Next: create it (mkdir -p), or name the directory that holds your lock files.`,
      expect.stringMatching(new RegExp(`^exactlock doctor: ${file} is not a directory .*\\(ENOTDIR\\) \\[not_a_directory\\]\\. Next: `)),
      expect.stringMatching(/\(ENOTDIR\) \[not_a_directory\]\. Next: name the directory that holds the lock files/),
    ]);
    // The directory that could be probed is still reported.
    expect(result.stdout.split("\n")[0]).toBe(LOCAL_LINE(dir, findmntType(dir)));
    const json = await runCli(["doctor", "--json", path.join(dir, "nope")]);
    expect(json.status).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual([
      {
        ok: false,
        dir: path.join(dir, "nope"),
        code: "not_found",
        errno: "ENOENT",
        message: `${path.join(dir, "nope")} does not exist (ENOENT)`,
        nextStep: "create it (mkdir -p), or name the directory that holds your lock files",
      },
    ]);
    expect(readdirSync(dir)).toEqual(["file"]);
  });

  it("refuses a directory that takes no entries (/proc) with its own code", async (ctx) => {
    skipUnless(ctx, { linux: true }); // /proc
    const result = await runCli(["doctor", "/proc"]);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/\/proc takes no new entries .* \[no_new_entries\]\. Next: /);
  });

  it("refuses a read-only mount: no lock can be made there", async (ctx) => {
    skipUnless(ctx, { linux: true, root: true, tools: ["mount", "umount"] }); // a read-only tmpfs
    await withTmpfs("ro", async (mountPoint) => {
      const result = await runCli(["doctor", mountPoint]);
      expect(result.status).toBe(1);
      expect(result.stderr).toBe(
        `exactlock doctor: ${mountPoint} is on a read-only filesystem: no lock can be made there (EROFS) [read_only]. Next: put the lock files on a writable mount, or remount it read-write.\n`,
      );
    });
  });

  it("probes a tmpfs mounted for the test, not the filesystem around it", async (ctx) => {
    skipUnless(ctx, { linux: true, root: true, tools: ["mount", "umount"] }); // a tmpfs
    await withTmpfs("rw", async (mountPoint) => {
      const result = await runCli(["doctor", "--line", mountPoint]);
      expect(result.status).toBe(0);
      expect(result.stdout).toBe(`${LOCAL_LINE(mountPoint, "tmpfs")}\n`);
      expect(readdirSync(mountPoint)).toEqual([]);
    });
  });

  it("usage errors exit 2", async () => {
    const none = await runCli(["doctor"]);
    expect(none.status).toBe(2);
    expect(none.stderr).toContain("doctor needs at least one DIR");
    const both = await runCli(["doctor", "--json", "--line", dir]);
    expect(both.status).toBe(2);
    const help = await runCli(["doctor", "--help"]);
    expect(help.status).toBe(0);
    expect(help.stdout).toContain("Usage: exactlock doctor [options] DIR...");
    const global = await runCli(["--help"]);
    expect(global.stdout).toMatch(/^ {2}doctor \[--line\] DIR\.\.\. /m);
  });
});

describe("probeFilesystem", () => {
  it("resolves to the findings for a directory and to a failure object for a missing one", async () => {
    const found = await probeFilesystem(dir);
    expect(found.ok).toBe(true);
    if (!found.ok) return;
    expect(found.renameNoreplace).toEqual({ result: "yes" });
    expect(found.notes.length).toBeGreaterThan(0);
    const missing = await probeFilesystem(path.join(dir, "missing"));
    expect(missing).toMatchObject({ ok: false, code: "not_found", errno: "ENOENT" });
    expect(readdirSync(dir)).toEqual([]);
  });
});

/**
 * sshfs: a FUSE filesystem whose daemon refuses the rename flags (EINVAL).
 * A real sshd bound to 127.0.0.1 on a scratch config, a real sshfs mount;
 * both taken down on every path.
 */
/** Runs `body` (an ES module body with `acquireLock` imported from dist) in a fresh node process. */
function withExactlock(body: string, env: Record<string, string> = {}) {
  const script = `const { acquireLock } = await import(${JSON.stringify(path.join(ROOT, "dist", "index.js"))});\n${body}`;
  return spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    encoding: "utf8",
    env: { ...process.env, ...env },
  });
}

describe("exactlock doctor on sshfs (a FUSE mount that refuses the rename flags)", () => {
  /** Starts sshd and mounts its `srv` dir at `mnt` under `root`; returns the teardown. */
  function mountSshfs(root: string): { mnt: string; srv: string; teardown: () => void } {
    const [srv, mnt] = [path.join(root, "srv"), path.join(root, "mnt")];
    mkdirSync(srv);
    mkdirSync(mnt);
    mkdirSync("/run/sshd", { recursive: true });
    for (const key of ["hostkey", "userkey"]) {
      const made = spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path.join(root, key)]);
      if (made.status !== 0) throw new Error(`ssh-keygen failed: ${made.stderr}`);
    }
    writeFileSync(path.join(root, "authorized_keys"), readFileSync(path.join(root, "userkey.pub")), { mode: 0o600 });
    const pidFile = path.join(root, "sshd.pid");
    let port = 0;
    let started = false;
    for (let attempt = 0; attempt < 5 && !started; attempt++) {
      port = 20_000 + Math.floor(Math.random() * 40_000);
      writeFileSync(
        path.join(root, "sshd_config"),
        [
          `Port ${port}`,
          "ListenAddress 127.0.0.1",
          `HostKey ${path.join(root, "hostkey")}`,
          `AuthorizedKeysFile ${path.join(root, "authorized_keys")}`,
          "PermitRootLogin yes",
          "PasswordAuthentication no",
          "StrictModes no",
          "UsePAM no",
          `PidFile ${pidFile}`,
          "Subsystem sftp internal-sftp",
          "",
        ].join("\n"),
      );
      // sshd forks into the background and writes its pid once it listens.
      started = spawnSync("/usr/sbin/sshd", ["-f", path.join(root, "sshd_config"), "-E", path.join(root, "sshd.log")]).status === 0;
      for (let i = 0; started && i < 50 && !existsSync(pidFile); i++) spawnSync("sleep", ["0.1"]);
      started &&= existsSync(pidFile);
    }
    if (!started) throw new Error("sshd did not start on 127.0.0.1");
    const stopSshd = () => {
      const pid = Number(readFileSync(pidFile, "utf8").trim());
      if (pid > 0) process.kill(pid, "SIGTERM");
    };
    const mounted = spawnSync(
      "sshfs",
      [
        `root@127.0.0.1:${srv}`,
        mnt,
        "-p",
        String(port),
        "-o",
        `IdentityFile=${path.join(root, "userkey")},StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes`,
      ],
      { encoding: "utf8" },
    );
    if (mounted.status !== 0) {
      stopSshd();
      throw new Error(`sshfs mount failed: ${mounted.stderr.trim()}`);
    }
    return {
      mnt,
      srv,
      teardown: () => {
        if (spawnSync("fusermount", ["-u", mnt]).status !== 0 && spawnSync("umount", [mnt]).status !== 0) {
          spawnSync("umount", ["-l", mnt]);
        }
        stopSshd();
      },
    };
  }

  it("says noreplace=no exchange=no, and a lock there issues the refused call once, then goes straight to the fallback", async (ctx) => {
    skipUnless(ctx, { linux: true, root: true, tools: ["sshfs", "/usr/sbin/sshd", "ssh-keygen", "fusermount"] }); // sshfs over a local sshd
    const { mnt, srv, teardown } = mountSshfs(dir);
    try {
      const line = await runCli(["doctor", "--line", mnt]);
      expect(line.stderr).toBe("");
      expect(line.stdout).toMatch(
        new RegExp(`^${mnt}: fuse\\.sshfs \\(network\\) noreplace=no exchange=no flock=\\w+ inotify=this_host_only\\n$`),
      );
      const json = JSON.parse((await runCli(["doctor", "--json", mnt])).stdout) as Array<Record<string, any>>;
      expect(json[0]!.renameNoreplace).toEqual({ result: "no", errno: "EINVAL" });
      expect(json[0]!.notes.map((note: { code: string }) => note.code)).toEqual(
        expect.arrayContaining(["publish_fallback", "reclaim_in_place", "wake_by_timer", "host_id_required"]),
      );

      // Three locks in a fresh process: the first publication meets EINVAL
      // and is remembered; the later ones do not issue the call.
      const run = withExactlock(
        `for (let i = 0; i < 3; i++) { const release = await acquireLock(${JSON.stringify(mnt)} + "/f" + i); await release(); }`,
        { NODE_DEBUG: "exactlock" },
      );
      expect(run.status, run.stderr).toBe(0);
      const refused = run.stderr.match(/RENAME_NOREPLACE refused on device \d+ \(EINVAL\)/g) ?? [];
      const skipped = run.stderr.match(/no RENAME_NOREPLACE on device \d+ \(refused there before\)/g) ?? [];
      if (PORTABLE) {
        // The portable mechanisms never issue the flag: nothing to refuse, nothing to remember.
        expect([refused, skipped]).toEqual([[], []]);
      } else {
        expect(refused).toHaveLength(1);
        expect(skipped.length).toBeGreaterThanOrEqual(2);
      }
      expect(readdirSync(srv)).toEqual([]);

      // Two locks of a dead owner (written on the server's side): the first
      // reclaim meets EINVAL for the exchange and removes in place; the
      // second goes in place at once, staging nothing for a doomed call.
      for (const name of ["a", "b"]) {
        dirWithInfo(path.join(srv, `${name}.lock`), legacyRecordBytes({ pid: deadPid(), start_time: "Wed Dec  2 08:36:20 2026" }));
      }
      const reclaim = withExactlock(
        `for (const name of ["a", "b"]) { const release = await acquireLock(${JSON.stringify(mnt)} + "/" + name); await release(); }`,
        { NODE_DEBUG: "exactlock" },
      );
      expect(reclaim.status, reclaim.stderr).toBe(0);
      const exchangeRefused = reclaim.stderr.match(/RENAME_EXCHANGE refused on device \d+ \(EINVAL\)/g) ?? [];
      const exchangeSkipped =
        reclaim.stderr.match(/no RENAME_EXCHANGE on device \d+ \(refused there before\): reclaiming in place/g) ?? [];
      expect([exchangeRefused.length, exchangeSkipped.length]).toEqual(PORTABLE ? [0, 0] : [1, 1]);
      expect(readdirSync(srv)).toEqual([]);

      // A waiter that gives up while this process holds the lock leaves no
      // staging behind (its record is closed before the removal: sshfs
      // keeps an unlinked open file as .fuse_hidden…).
      const release = await acquireLock(path.join(mnt, "held"));
      try {
        const waiter = withExactlock(
          `try { await acquireLock(${JSON.stringify(path.join(mnt, "held"))}, { retries: 3, retryDelayMs: 100 }); process.exit(3); }\n` +
            "catch (error) { console.log(error.code); }",
        );
        expect(waiter.stdout.trim(), waiter.stderr).toBe("ELOCKED");
        expect(readdirSync(srv)).toEqual(["held.lock"]);
      } finally {
        await release();
      }
      expect(readdirSync(srv)).toEqual([]);
    } finally {
      teardown();
    }
  });
});
