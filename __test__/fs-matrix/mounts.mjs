// Real filesystems for the filesystem matrix (and for `npm run bench -- --fs …`):
// mounts made and removed by this module, as root, under one temp directory.
//
//   import { FILESYSTEMS, mountFs, unmountAll, whyNotMountable } from "./mounts.mjs";
//   const ext4 = await mountFs("ext4");    // { kind, dir, …, unmount() }
//   …
//   await unmountAll();                     // everything this process mounted or started
//
// Plain ESM without dependencies: vitest imports it, and so can a node script.
//
// What each kind is:
//   ext4      the temp directory itself (os.tmpdir(), ext4 on the test machines; its
//             statfs type is reported as `fsType`, not assumed)
//   tmpfs     `mount -t tmpfs` (64 MiB)
//   xfs       a 320 MiB sparse image (mkfs.xfs's minimum is 300 MiB) on a loop device
//   btrfs     a 256 MiB sparse image on a loop device
//   overlayfs `mount -t overlay` with lower, upper and work dirs on the temp dir; `dir` is
//             the merged view, `lowerDir` the lower layer (write there BEFORE using `dir`)
//   sshfs     an `sshd` started here on 127.0.0.1 and a free port, throwaway host and client
//             keys; `exportDir` (a directory of the temp dir) is mounted at `dir` through
//             SFTP as root. `mountSshfs(exportDir)` adds more views of the same export.
//
// sshfs options, and why (see `SSHFS_OPTIONS`): only what a non-interactive loopback login
// needs (the key, no known_hosts, no password prompt, the port) plus `reconnect` off. The
// caching options are left at sshfs's defaults (`cache=yes`, 20 s attribute and directory
// cache; the kernel's entry/attribute timeouts of libfuse): that is what users get, and the
// stale metadata it serves is what the tests must survive.
//
// Cleanup: every mount and daemon is registered as it is made; `unmountAll()` undoes them
// in reverse order (umount, then `umount -l` as a last resort; the sshd is SIGTERMed, then
// SIGKILLed) and removes the temp directory. A process `exit` hook does the same
// synchronously if a caller forgot, and so does a SIGTERM, SIGINT or SIGHUP (then re-raised).
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

/** The kinds `mountFs` knows, in the order the matrix runs them. */
export const FILESYSTEMS = ["ext4", "tmpfs", "xfs", "btrfs", "overlayfs", "sshfs"];

/** `statfs` f_type of each kind (linux/magic.h), to check a mount is what it claims. */
export const MAGIC = {
  ext4: 0xef53,
  tmpfs: 0x01021994,
  xfs: 0x58465342,
  btrfs: 0x9123683e,
  overlayfs: 0x794c7630,
  sshfs: 0x65735546, // FUSE
};

/** The tools each kind needs on PATH (Debian: xfsprogs, btrfs-progs, sshfs, openssh-server). */
export const TOOLS = {
  ext4: [],
  tmpfs: ["mount", "umount"],
  xfs: ["mount", "umount", "mkfs.xfs", "truncate"],
  btrfs: ["mount", "umount", "mkfs.btrfs", "truncate"],
  overlayfs: ["mount", "umount"],
  sshfs: ["sshfs", "ssh", "ssh-keygen", "fusermount3", "umount"],
};

/** The options every sshfs mount gets (caching stays at sshfs's defaults on purpose). */
export const SSHFS_OPTIONS = [
  "StrictHostKeyChecking=no",
  "UserKnownHostsFile=/dev/null",
  "BatchMode=yes",
  "LogLevel=ERROR",
  "PasswordAuthentication=no",
];

const SSHD_CANDIDATES = ["/usr/sbin/sshd", "/usr/bin/sshd"];
const SFTP_SERVER_CANDIDATES = ["/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/lib/ssh/sftp-server"];

/** Everything made so far, newest last: `{ what, undo() }`. */
const made = [];
let base;

function onPath(tool) {
  return spawnSync("sh", ["-c", 'command -v "$1" >/dev/null 2>&1', "sh", tool]).status === 0;
}

function sshd() {
  return SSHD_CANDIDATES.find((candidate) => fs.existsSync(candidate));
}

/**
 * Why `kind` cannot be mounted here (not Linux, not root, a missing tool, no /dev/fuse),
 * or `undefined` when it can: the reason the tests on it are skipped with. The platform
 * is EXACTLOCK_TEST_PLATFORM's when set, as in ../premises.ts.
 */
export function whyNotMountable(kind) {
  if (!FILESYSTEMS.includes(kind)) return `unknown filesystem kind ${JSON.stringify(kind)}`;
  const platform = process.env.EXACTLOCK_TEST_PLATFORM || process.platform;
  // Every kind is Linux's (ext4 is the temp directory of the Linux test machines).
  if (platform !== "linux") return `needs Linux (this is ${platform})`;
  if (kind === "ext4") return undefined;
  const uid = process.getuid?.();
  if (uid !== 0) return `needs root to mount (running as uid ${uid})`;
  const missing = TOOLS[kind].filter((tool) => !onPath(tool));
  if (kind === "sshfs" && !sshd()) missing.push("sshd");
  if (missing.length > 0) return `missing tool: ${missing.join(", ")}`;
  if (kind === "sshfs" && !fs.existsSync("/dev/fuse")) return "no /dev/fuse";
  return undefined;
}

/** The temp directory everything lives under (made on first use). */
export function baseDir() {
  if (base === undefined) {
    base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-fsmatrix-")));
    made.push({ what: `temp dir ${base}`, undo: () => fs.rmSync(base, { recursive: true, force: true }) });
  }
  return base;
}

function freshDir(name) {
  const dir = fs.mkdtempSync(path.join(baseDir(), `${name}-`));
  return dir;
}

function run(command, args, what) {
  const result = spawnSync(command, args, { encoding: "utf8" });
  if (result.error) throw new Error(`${what}: ${command} failed to start: ${result.error.message}`);
  if (result.status !== 0) {
    throw new Error(`${what}: \`${command} ${args.join(" ")}\` exited ${result.status}: ${(result.stderr || result.stdout).trim()}`);
  }
  return result.stdout;
}

/** Unmounts `dir`: umount, then a lazy umount as the last resort. Never throws. */
function unmountDir(dir) {
  for (let tries = 0; tries < 20; tries += 1) {
    if (spawnSync("umount", [dir], { encoding: "utf8" }).status === 0) return;
    if (!isMountPoint(dir)) return;
    // Busy: a child that just exited may still hold a descriptor for a moment.
    spawnSync("sleep", ["0.1"]);
  }
  spawnSync("umount", ["-l", dir]);
}

/** Whether `dir` is a mount point (per /proc/self/mountinfo). */
export function isMountPoint(dir) {
  const escaped = dir.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`);
  try {
    return fs
      .readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .some((line) => line.split(" ")[4] === escaped);
  } catch {
    return false;
  }
}

/** The `statfs` f_type of `dir`, as a number. */
export function fsTypeOf(dir) {
  return Number(fs.statfsSync(dir).type);
}

function register(what, undo) {
  const entry = { what, undo };
  made.push(entry);
  return async () => {
    const at = made.indexOf(entry);
    if (at >= 0) {
      made.splice(at, 1);
      await undo();
    }
  };
}

/**
 * Mounts a fresh filesystem of `kind` and returns
 * `{ kind, dir, fsType, unmount(), …extra }` (see the module docs for the extras:
 * `lowerDir` for overlayfs, `exportDir` and `sshd` for sshfs). `dir` is empty and
 * realpath'd. Throws (with the tool's message) when a mount fails.
 */
export async function mountFs(kind) {
  const why = whyNotMountable(kind);
  if (why) throw new Error(`cannot mount ${kind}: ${why}`);
  switch (kind) {
    case "ext4": {
      const dir = freshDir("ext4");
      return { kind, dir, fsType: fsTypeOf(dir), unmount: async () => fs.rmSync(dir, { recursive: true, force: true }) };
    }
    case "tmpfs": {
      const dir = freshDir("tmpfs");
      run("mount", ["-t", "tmpfs", "-o", "size=64m,mode=0755", "tmpfs", dir], "tmpfs");
      const unmount = register(`tmpfs at ${dir}`, () => unmountDir(dir));
      return { kind, dir, fsType: fsTypeOf(dir), unmount };
    }
    case "xfs":
    case "btrfs":
      return mountLoop(kind);
    case "overlayfs":
      return mountOverlay();
    case "sshfs": {
      const server = await startSshd();
      const exportDir = freshDir("sshfs-export");
      const view = await mountSshfs(exportDir, server);
      return { kind, dir: view.dir, exportDir, sshd: server, fsType: view.fsType, unmount: view.unmount };
    }
  }
  throw new Error(`unknown filesystem kind ${kind}`);
}

async function mountLoop(kind) {
  const work = freshDir(`${kind}-image`);
  const image = path.join(work, `${kind}.img`);
  const dir = path.join(work, "mnt");
  fs.mkdirSync(dir);
  run("truncate", ["-s", kind === "xfs" ? "320M" : "256M", image], `${kind} image`);
  if (kind === "xfs") run("mkfs.xfs", ["-q", "-f", image], "mkfs.xfs");
  else run("mkfs.btrfs", ["-q", "-f", image], "mkfs.btrfs");
  // `-o loop` picks a free loop device and detaches it on umount (autoclear).
  run("mount", ["-t", kind, "-o", "loop", image, dir], `${kind} mount`);
  const unmount = register(`${kind} at ${dir}`, () => unmountDir(dir));
  return { kind, dir, image, fsType: fsTypeOf(dir), unmount };
}

async function mountOverlay() {
  const root = freshDir("overlayfs");
  const [lowerDir, upperDir, workDir, dir] = ["lower", "upper", "work", "merged"].map((name) => path.join(root, name));
  for (const each of [lowerDir, upperDir, workDir, dir]) fs.mkdirSync(each);
  run("mount", ["-t", "overlay", "overlay", "-o", `lowerdir=${lowerDir},upperdir=${upperDir},workdir=${workDir}`, dir], "overlay mount");
  const unmount = register(`overlay at ${dir}`, () => unmountDir(dir));
  return {
    kind: "overlayfs",
    dir,
    lowerDir,
    upperDir,
    fsType: fsTypeOf(dir),
    unmount,
    /** Remounts (after writing to the lower layer, which an overlay only sees afresh). */
    remount: () => {
      unmountDir(dir);
      run("mount", ["-t", "overlay", "overlay", "-o", `lowerdir=${lowerDir},upperdir=${upperDir},workdir=${workDir}`, dir], "overlay remount");
    },
  };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

let sharedSshd;

/**
 * An sshd on 127.0.0.1 and a free port, for root with a throwaway key only (no
 * passwords, no PAM), serving SFTP. One per process, reused by every sshfs mount;
 * `{ port, identity, stop() }`.
 */
export async function startSshd() {
  if (sharedSshd) return sharedSshd;
  const keys = freshDir("sshd");
  const hostKey = path.join(keys, "host_ed25519");
  const identity = path.join(keys, "client_ed25519");
  run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", hostKey], "ssh-keygen (host key)");
  run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", identity], "ssh-keygen (client key)");
  const authorized = path.join(keys, "authorized_keys");
  fs.copyFileSync(`${identity}.pub`, authorized);
  fs.chmodSync(authorized, 0o600);
  const sftp = SFTP_SERVER_CANDIDATES.find((candidate) => fs.existsSync(candidate)) ?? "internal-sftp";
  const config = path.join(keys, "sshd_config");
  const pidFile = path.join(keys, "sshd.pid");
  // sshd refuses to start without its privilege separation directory.
  if (!fs.existsSync("/run/sshd")) fs.mkdirSync("/run/sshd", { mode: 0o755, recursive: true });
  let lastError = "";
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const port = await freePort();
    fs.writeFileSync(
      config,
      [
        `Port ${port}`,
        "ListenAddress 127.0.0.1",
        `HostKey ${hostKey}`,
        `PidFile ${pidFile}`,
        `AuthorizedKeysFile ${authorized}`,
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "X11Forwarding no",
        "AllowTcpForwarding no",
        "PrintMotd no",
        "MaxSessions 64",
        "MaxStartups 64",
        `Subsystem sftp ${sftp}`,
        "",
      ].join("\n"),
    );
    const daemon = spawn(sshd(), ["-D", "-e", "-f", config], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    daemon.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk));
    let exited = daemon.exitCode !== null;
    daemon.once("exit", () => (exited = true));
    const deadline = Date.now() + 10_000;
    while (!exited && Date.now() < deadline && !(await canConnect(port))) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (!exited && (await canConnect(port))) {
      const stopDaemon = async () => {
        sharedSshd = undefined;
        if (daemon.exitCode !== null || daemon.signalCode !== null) return;
        const gone = new Promise((resolve) => daemon.once("exit", resolve));
        daemon.kill("SIGTERM");
        const timer = setTimeout(() => daemon.kill("SIGKILL"), 3_000);
        await gone;
        clearTimeout(timer);
      };
      const stop = register(`sshd on 127.0.0.1:${port}`, stopDaemon);
      made[made.length - 1].pid = daemon.pid;
      sharedSshd = { port, identity, pid: daemon.pid, stop };
      return sharedSshd;
    }
    if (!exited) daemon.kill("SIGKILL");
    lastError = stderr.trim();
  }
  throw new Error(`cannot start sshd on 127.0.0.1: ${lastError}`);
}

/**
 * Mounts `exportDir` (a local directory) through sshfs at a fresh mount point: another
 * "host's" view of the same volume, with sshfs `extraOptions` if any (`workaround=rename`).
 * `{ dir, fsType, unmount() }`.
 */
export async function mountSshfs(exportDir, server, extraOptions = []) {
  const sshdInfo = server ?? (await startSshd());
  const dir = freshDir("sshfs-view");
  const options = [...SSHFS_OPTIONS, `IdentityFile=${sshdInfo.identity}`, `port=${sshdInfo.port}`, ...extraOptions];
  run("sshfs", [`root@127.0.0.1:${exportDir}`, dir, "-o", options.join(",")], "sshfs mount");
  const unmount = register(`sshfs at ${dir}`, () => {
    if (spawnSync("fusermount3", ["-u", dir]).status !== 0) unmountDir(dir);
  });
  return { dir, fsType: fsTypeOf(dir), unmount };
}

/** Mounts every kind in `kinds` that can be mounted here; `{ mounts, skipped }`. */
export async function mountAll(kinds = FILESYSTEMS) {
  const mounts = {};
  const skipped = {};
  for (const kind of kinds) {
    const why = whyNotMountable(kind);
    if (why) skipped[kind] = why;
    else mounts[kind] = await mountFs(kind);
  }
  return { mounts, skipped };
}

/** Undoes everything this process mounted or started, newest first. Never throws. */
export async function unmountAll() {
  while (made.length > 0) {
    const entry = made.pop();
    try {
      await entry.undo();
    } catch (error) {
      console.error(`exactlock fs-matrix: cleanup of ${entry.what} failed: ${error?.message ?? error}`);
    }
  }
  base = undefined;
}

/**
 * Undoes everything at once, synchronously (no awaiting where this runs): the sshd is
 * SIGKILLed, mounts are unmounted, the temp directory is removed.
 */
function undoAllNow() {
  while (made.length > 0) {
    const entry = made.pop();
    if (entry.pid) {
      try {
        process.kill(entry.pid, "SIGKILL");
      } catch {}
      continue;
    }
    try {
      const result = entry.undo();
      if (result && typeof result.then === "function") result.catch(() => {});
    } catch {}
  }
}

// A caller that forgot: undo on exit.
process.once("exit", undoAllNow);
// A run stopped by a signal (a CI step's timeout, Ctrl-C, a `kill` of the runner) fires no
// `exit`: undo, then die of the same signal. (Measured: a SIGTERM to the vitest workers left
// two sshfs mounts and their sshd behind.)
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
  process.once(signal, () => {
    undoAllNow();
    process.kill(process.pid, signal);
  });
}
