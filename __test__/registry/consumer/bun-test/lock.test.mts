import { afterAll, expect, test } from "bun:test";
import { acquireLock, FileLockAcquireError, withFileLock } from "exactlock";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "exactlock-consumer-bun-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("withFileLock holds the lock while its function runs", async () => {
  const file = join(dir, "config.json");
  expect(await withFileLock(file, () => existsSync(`${file}.lock`))).toBe(true);
  expect(existsSync(`${file}.lock`)).toBe(false);
});

test("await using, and FileLockAcquireError for a second taker", async () => {
  const file = join(dir, "settings.json");
  {
    await using _lock = await acquireLock(file);
    const second = await acquireLock(file, { retries: 0 }).catch((error: unknown) => error);
    expect(second).toBeInstanceOf(FileLockAcquireError);
  }
  expect(existsSync(`${file}.lock`)).toBe(false);
});

test("two bun processes (ESM and CommonJS) lose no update", async () => {
  const file = join(dir, "counter");
  writeFileSync(file, "0");
  const children = ["src/count.mts", "src/count.cts"].map((script) =>
    Bun.spawn([process.execPath, script, file, "100"], { stdout: "inherit", stderr: "inherit" }),
  );
  expect(await Promise.all(children.map((child) => child.exited))).toEqual([0, 0]);
  expect(readFileSync(file, "utf8")).toBe("200");
});
