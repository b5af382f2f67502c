/**
 * Long file names (issue 19, item 5). exactlock derives three names from
 * a file name F: the lock `F.lock`, the staging `F.lock.pending.<pid>.<uuid>`
 * and the quarantine `F.lock.removing.<pid>.<uuid>`, one byte longer than
 * the staging. A name is at most NAME_MAX (255) bytes. When the staging
 * name was exactly 255 bytes, the acquisition succeeded but every release
 * failed (the quarantine name did not fit), the generation stayed fenced
 * and the lock was held until the process exited.
 *
 * Now every derived name is checked before anything touches the disk,
 * against 255 bytes and the widest pid of the platform (Linux: 7 digits,
 * pid_max's ceiling 4194304), so a name that locks in one process locks in
 * every other: the longest file name is 196 bytes; one byte more is
 * `ENAMETOOLONG`, naming the limit, and nothing is created, not even a
 * missing parent directory.
 *
 * Real files on the real filesystem; the names are counted in bytes (UTF-8).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, acquireLockSync, FileLockError, withFileLock } from "../lib/index.ts";
import { cleanup, tempRoot } from "./fixtures/children.ts";

afterEach(cleanup);

/** NAME_MAX on every filesystem exactlock is tested on (ext4, xfs, btrfs, tmpfs, overlayfs). */
const NAME_MAX = 255;
/** `.lock` + `.removing.` + 7 pid digits + `.` + a 36-byte uuid. */
const LONGEST_FILE_NAME = NAME_MAX - (".lock".length + ".removing.".length + 7 + 1 + 36);

/** A file name of exactly `bytes` bytes in UTF-8, with multi-byte characters in it. */
function nameOfBytes(bytes: number): string {
  const name = `é-${"n".repeat(bytes - 3)}`;
  expect(Buffer.byteLength(name)).toBe(bytes);
  return name;
}

/** The byte length of the staging name this process would make for `name`. */
function stagingBytes(name: string): number {
  return Buffer.byteLength(`${name}.lock.pending.${process.pid}.`) + 36;
}

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection, but the lock was acquired");
}

function expectTooLong(error: unknown): void {
  expect(error).toBeInstanceOf(FileLockError);
  expect((error as FileLockError).code).toBe("ENAMETOOLONG");
  expect((error as Error).message).toContain(`${NAME_MAX} bytes`);
  expect((error as Error).message).toContain(`${LONGEST_FILE_NAME} bytes`);
}

describe("long file names", () => {
  it("the longest allowed file name (196 bytes) acquires, releases and re-acquires, leaving nothing on disk", async () => {
    expect(LONGEST_FILE_NAME).toBe(196);
    const root = tempRoot("exactlock-names-");
    const file = path.join(root, nameOfBytes(LONGEST_FILE_NAME));
    for (let round = 0; round < 2; round += 1) {
      const release = await acquireLock(file, { retries: 0 });
      expect(fs.readdirSync(root)).toEqual([`${path.basename(file)}.lock`]);
      await release();
      expect(fs.readdirSync(root)).toEqual([]);
    }
    const releaseSync = acquireLockSync(file, { retries: 0 });
    releaseSync();
    expect(await withFileLock(file, async () => fs.readdirSync(root).length)).toBe(1);
    expect(fs.readdirSync(root)).toEqual([]);
  });

  it("one byte longer (197 bytes) is refused with ENAMETOOLONG before anything is created, not even the missing parent", async () => {
    const root = tempRoot("exactlock-names-");
    const parent = path.join(root, "missing", "parent");
    const file = path.join(parent, nameOfBytes(LONGEST_FILE_NAME + 1));
    expectTooLong(await rejectionOf(acquireLock(file, { retries: 0 })));
    expectTooLong(await rejectionOf(withFileLock(file, async () => "entered")));
    let thrown: unknown;
    try {
      acquireLockSync(file, { retries: 0 })();
    } catch (error) {
      thrown = error;
    }
    expectTooLong(thrown);
    expect(fs.readdirSync(root)).toEqual([]);
    // The same name with a short one beside it: the failure left nothing fenced.
    const short = path.join(root, "short.json");
    await withFileLock(short, async () => {});
    expect(fs.readdirSync(root)).toEqual([]);
  });

  it("a name whose staging name is exactly NAME_MAX in this process (the one that wedged its lock) is refused up front", async () => {
    const root = tempRoot("exactlock-names-");
    // 255 − `.lock.pending.` − this pid − `.` − uuid: its quarantine name would be 256 bytes.
    const bytes = NAME_MAX - stagingBytes("");
    const file = path.join(root, nameOfBytes(bytes));
    expect(stagingBytes(path.basename(file))).toBe(NAME_MAX);
    expect(bytes).toBeGreaterThan(LONGEST_FILE_NAME);
    expectTooLong(await rejectionOf(acquireLock(file, { retries: 0 })));
    expect(fs.readdirSync(root)).toEqual([]);
  });
});
