// The crash path's syscalls, counted: `node bench/crash-calls.mjs` (Linux, strace on PATH).
//
// A holder (a child process) takes the lock and is SIGKILLed while a waiter (another child,
// default options, run under `strace -f`) waits for it. From the waiter's trace, this counts the
// calls of the thread that was asleep on the holder's pidfd, from its sleep returning to the
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
  // A run whose waiter happened to wake on its retry timer as the holder died
  // counts nothing (see recoveryCalls): tried again, a few times.
  let calls = null;
  for (let run = 0; run < 3 && calls === null; run++) calls = await recoveryOfOneCrash();
  if (calls === null) throw new Error("three runs in a row were woken by the waiter's timer, not the pidfd");
  const counts = new Map();
  for (const call of calls) counts.set(call.name, (counts.get(call.name) ?? 0) + 1);
  const perCall = [...counts].sort((a, b) => b[1] - a[1]).map(([name, n]) => `${n} ${name}`);
  console.log(`crash path: ${calls.length} calls from the pidfd wake-up to the lock (${perCall.join(", ")})`);
  if (process.argv.includes("--show")) for (const call of calls) console.log(`  ${call.text.slice(0, 160)}`);
}

/** One holder SIGKILLed under a traced waiter: the waiter's recovery calls, or null (see recoveryCalls). */
async function recoveryOfOneCrash() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-crash-calls-"));
  const file = path.join(dir, "state.json");
  const traceFile = path.join(dir, "waiter.trace");
  const self = fileURLToPath(import.meta.url);
  try {
    const holder = spawn(process.execPath, [self, "holder", file], { stdio: ["ignore", "pipe", "inherit"] });
    await new Promise((resolve) => holder.stdout.once("data", resolve));
    const waiter = spawn("strace", ["-f", "-o", traceFile, process.execPath, self, "waiter", file], { stdio: "inherit" });
    // Until the waiter has found the lock held and opened a pidfd of the holder (strace writes
    // the trace as it goes), and a moment more for it to fall asleep on it: a fixed pause was
    // not always long enough on a loaded machine.
    const deadline = Date.now() + 60_000;
    while (!(fs.existsSync(traceFile) && fs.readFileSync(traceFile, "utf8").includes("pidfd_open("))) {
      if (Date.now() > deadline) throw new Error("the waiter never looked at the holder");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    holder.kill("SIGKILL");
    const code = await new Promise((resolve) => waiter.once("exit", resolve));
    if (code !== 0) throw new Error(`the waiter exited with ${code}`);
    return recoveryCalls(fs.readFileSync(traceFile, "utf8"));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The calls of the thread woken by the pidfd, from that wake-up to the eventfd write after it;
 * null when the last wake-up before that write was its retry timer running out, not the pidfd.
 */
function recoveryCalls(trace) {
  const lines = trace.split("\n");
  // (strace may split the call: `write(16, "\1\0…", 8 <unfinished ...>`)
  const wakesJs = (line) => /^\d+ +write\(\d+, "\\1\\0\\0\\0\\0\\0\\0\\0", 8[) ]/.test(line);
  const slept = (line) => /(ppoll|epoll_p?wait)/.test(line) && /\) = \d/.test(line);
  // The waiting thread sleeps on the holder's pidfd (in `epoll_pwait`, beside its inotify
  // subscription; `ppoll` in older builds) and, once it holds the lock, wakes JavaScript with an
  // eventfd write. The last such write of a thread that opened a pidfd names it; its last sleep
  // before that write which returned a ready descriptor is the holder's exit.
  const tidOf = (line) => line.split(" ")[0];
  const watchers = new Set(lines.filter((line) => /^\d+ +pidfd_open\(/.test(line)).map(tidOf));
  const wrote = lines.findLastIndex((line) => wakesJs(line) && watchers.has(tidOf(line)));
  if (wrote < 0) throw new Error("the waiting thread never woke JavaScript");
  const tid = tidOf(lines[wrote]);
  const start = lines.findLastIndex((line, i) => i < wrote && line.startsWith(`${tid} `) && slept(line));
  if (start < 0) throw new Error("no wake-up in the waiter's trace");
  // Its retry timer ran out in the moment the holder was killed: that wake-up
  // was not the pidfd's, and the recovery it made is not the one counted.
  if (/\) = 0/.test(lines[start])) return null;
  const calls = [];
  for (const line of lines.slice(start + 1)) {
    if (!line.startsWith(`${tid} `)) continue;
    const text = line.slice(tid.length).trimStart();
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
