#!/usr/bin/env node
// npm test: the suites that apply to this platform, one after another, stopping at the
// first that fails.
//
//   npm test                                   run this platform's steps
//   npm test -- --list                         print them, run nothing
//   EXACTLOCK_TEST_PLATFORM=darwin npm test -- --list
//                                              print another platform's (darwin, win32, linux)
//
// Linux: cargo test; vitest under Node (native, under load, forced portable); bun test;
//   the registry round trip. Tests that need root or a tool skip themselves without it,
//   with the reason (__test__/premises.ts).
// macOS: the same steps. Every test with a Linux premise (/proc, setpriv, unshare, mount,
//   strace, chattr, inotify, taskset) is gated by it and reported skipped; the rest is what
//   macOS's own mechanisms (kqueue, proc_pidinfo, renameatx_np) must pass. The portable
//   suite applies too: EXACTLOCK_PLATFORM=portable forces the portable mechanisms on macOS
//   as on Linux. The round trip installs the macOS package from a local registry and runs
//   the consumer's tests under Node.
// Windows: cargo test (the POSIX-fixture modules are compiled for unix only) and the Windows
//   suite (__test__/windows/). The other suites are POSIX throughout (they SIGKILL children,
//   set modes, run sh).
import { spawnSync } from "node:child_process";

const STEPS = {
  linux: ["test:rust", "test:node", "test:load", "test:portable", "test:bun", "test:registry"],
  darwin: ["test:rust", "test:node", "test:load", "test:portable", "test:bun", "test:registry"],
  win32: ["test:rust", "test:win32"],
};

const platform = process.env.EXACTLOCK_TEST_PLATFORM || process.platform;
const steps = STEPS[platform];
if (!steps) {
  console.error(`scripts/test.mjs: no test steps for platform ${JSON.stringify(platform)} (known: ${Object.keys(STEPS).join(", ")})`);
  process.exit(2);
}

if (process.argv.includes("--list")) {
  console.log(`npm test on ${platform}: ${steps.map((step) => `npm run ${step}`).join(", then ")}`);
  process.exit(0);
}
if (platform !== process.platform) {
  // Running another platform's steps here would test this machine under the wrong premises;
  // the simulation of a Mac's gates is `EXACTLOCK_TEST_PLATFORM=darwin npm run test:node`.
  console.error(`scripts/test.mjs: EXACTLOCK_TEST_PLATFORM=${platform} on ${process.platform}: only --list is allowed`);
  process.exit(2);
}

for (const step of steps) {
  const result = spawnSync("npm", ["run", step], { stdio: "inherit", shell: process.platform === "win32" });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
