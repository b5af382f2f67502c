// The crash path's syscalls, counted: `node bench/crash-calls.mjs` (Linux, strace on PATH).
//
// A holder (a child process) takes the lock and is SIGKILLed while a waiter (another child,
// default options, run under `strace -f`) waits for it. From the waiter's trace, this counts the
// calls of the thread that was asleep on the holder's pidfd, from its `ppoll` returning to the
// eventfd `write` that wakes JavaScript with the lock: the whole recovery, as the waiter's thread
// makes it. Prints the total and the count per call; `--show` prints the calls themselves.
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const dist = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "dist", "index.js");
const role = process.argv[2];

if (role === "holder") {
  const { acquireLock } = await import(dist);
  await acquireLock(process.argv[3]);
  process.stdout.write("held\n");
  setInterval(() => {}, 1 << 30);
} else if (role === "waiter") {
  const { acquireLock } = await import(dist);
  const release = await acquireLock(process.argv[3], { timeout: 20_000 });
  await release();
} else {
  if (spawnSync("strace", ["-V"]).error) {
    console.error("crash-calls: strace is not on PATH");
    process.exit(2);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-crash-calls-"));
  const file = path.join(dir, "state.json");
  const traceFile = path.join(dir, "waiter.trace");
  const self = fileURLToPath(import.meta.url);
  try {
    const holder = spawn(process.execPath, [self, "holder", file], { stdio: ["ignore", "pipe", "inherit"] });
    await new Promise((resolve) => holder.stdout.once("data", resolve));
    const waiter = spawn("strace", ["-f", "-o", traceFile, process.execPath, self, "waiter", file], { stdio: "inherit" });
    // Long enough for the waiter to start, find the lock held and fall asleep on the pidfd.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    holder.kill("SIGKILL");
    const code = await new Promise((resolve) => waiter.once("exit", resolve));
    if (code !== 0) throw new Error(`the waiter exited with ${code}`);
    const calls = recoveryCalls(fs.readFileSync(traceFile, "utf8"));
    const counts = new Map();
    for (const call of calls) counts.set(call.name, (counts.get(call.name) ?? 0) + 1);
    const perCall = [...counts].sort((a, b) => b[1] - a[1]).map(([name, n]) => `${n} ${name}`);
    console.log(`crash path: ${calls.length} calls from the pidfd wake-up to the lock (${perCall.join(", ")})`);
    if (process.argv.includes("--show")) for (const call of calls) console.log(`  ${call.text.slice(0, 160)}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The calls of the thread woken by the pidfd, from that wake-up to the eventfd write after it. */
function recoveryCalls(trace) {
  const lines = trace.split("\n");
  // The last ppoll that returned one ready descriptor: the pidfd's, in a waiter that slept once.
  let start = -1;
  let tid;
  lines.forEach((line, i) => {
    if (/ppoll/.test(line) && /revents=POLLIN/.test(line) && /\) = 1 /.test(line)) {
      start = i;
      tid = line.split(" ")[0];
    }
  });
  if (start < 0) throw new Error("no pidfd wake-up in the waiter's trace");
  const calls = [];
  for (const line of lines.slice(start + 1)) {
    if (!line.startsWith(`${tid} `)) continue;
    const text = line.slice(tid.length + 1);
    if (text.startsWith("<...")) {
      if (calls.length) calls[calls.length - 1].text += text.replace(/^<\.\.\. \w+ resumed>/, "");
      continue;
    }
    const name = /^(\w+)\(/.exec(text)?.[1];
    if (!name) continue;
    calls.push({ name, text });
    if (name === "write" && text.includes('"\\1\\0\\0\\0\\0\\0\\0\\0"')) return calls;
  }
  throw new Error("the woken thread never woke JavaScript");
}
