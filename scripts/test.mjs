#!/usr/bin/env node
// npm test: every suite, one after another, stopping at the first that fails.
//
// On Linux and macOS: cargo test, vitest under Node (native, under load, forced portable),
// bun test, the registry round trip. On Windows: cargo test (the POSIX-fixture modules are
// compiled for unix only) and the Windows suite (__test__/windows/): the other suites are
// POSIX (they SIGKILL, read /proc, mount, strace).
import { spawnSync } from "node:child_process";

const STEPS =
  process.platform === "win32"
    ? ["test:rust", "test:win32"]
    : ["test:rust", "test:node", "test:load", "test:portable", "test:bun", "test:registry"];

for (const step of STEPS) {
  const result = spawnSync("npm", ["run", step], { stdio: "inherit", shell: process.platform === "win32" });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
