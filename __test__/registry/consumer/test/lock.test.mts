import { acquireLock, withFileLock } from "exactlock";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { save } from "../src/save.mts";

const dir = mkdtempSync(join(tmpdir(), "exactlock-consumer-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(script: string, file: string, times: number): Promise<number | null> {
  const child = spawn(process.execPath, [script, file, String(times)], { stdio: "inherit" });
  return new Promise((resolve) => child.on("exit", resolve));
}

test("withFileLock holds the lock while its function runs", async () => {
  const file = join(dir, "config.json");
  const seen = await withFileLock(file, () => existsSync(`${file}.lock`));
  expect(seen).toBe(true);
  expect(existsSync(`${file}.lock`)).toBe(false);
});

test("await using releases at the end of the scope; a second taker gets FileLockAcquireError", async () => {
  const file = join(dir, "settings.json");
  {
    await using _lock = await acquireLock(file);
    expect(await save(file, "x")).toBe("busy");
  }
  expect(await save(file, "y")).toBe("saved");
  expect(readFileSync(file, "utf8")).toBe("y");
});

test("two processes (ESM and CommonJS) lose no update", async () => {
  const file = join(dir, "counter");
  writeFileSync(file, "0");
  const codes = await Promise.all([run("build/count.mjs", file, 100), run("build/count.cjs", file, 100)]);
  expect(codes).toEqual([0, 0]);
  expect(readFileSync(file, "utf8")).toBe("200");
});
