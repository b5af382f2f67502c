/**
 * updateFile / updateJson (issue 43): under the lock, read, call the
 * updater, commit atomically and durably, release. The README's own
 * example used to write in place under the lock, and a SIGKILL at the
 * wrong moment left a 0-byte file behind.
 */
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FileLockError, updateFile, updateFileSync, updateJson } from "../lib/index.ts";
import { FileUpdateError } from "../lib/update.ts";
import { cleanup, FIXTURES, lockPathOf, makeRoot, sleep } from "./helpers.ts";
import { runGc } from "./kernel-helpers.ts";
import { skipUnless } from "./premises.ts";

afterEach(cleanup);

const BUN = path.join(__dirname, "..", "node_modules", ".bin", "bun");

/** The temps of updates of `file` left in its directory. */
function temps(file: string): string[] {
  return fs.readdirSync(path.dirname(file)).filter((name) => name.startsWith(`.${path.basename(file)}.upd.`));
}

describe("updateFile", () => {
  it("writes, leaves, deletes; hands the updater the current content; nothing else is left", async () => {
    const file = path.join(makeRoot(), "notes.txt");
    expect(await updateFile(file, (current) => (current === undefined ? "one" : undefined))).toMatchObject({ written: true, bytes: 3 });
    expect(await updateFile<string>(file, (current) => `${current}+two`, { encoding: "utf8" })).toMatchObject({ written: true });
    expect(fs.readFileSync(file, "utf8")).toBe("one+two");
    expect(await updateFile(file, () => undefined)).toMatchObject({ written: false, deleted: false });
    const buffer = await updateFile(file, (current) => Buffer.concat([current as Buffer, Buffer.from("!")]));
    expect(buffer.bytes).toBe(8);
    expect(updateFileSync(file, () => null)).toMatchObject({ written: false, deleted: true });
    expect(fs.readdirSync(path.dirname(file))).toEqual([]);
  });

  it("keeps mode 0640; a new file gets fileMode", async () => {
    const file = path.join(makeRoot(), "config.json");
    fs.writeFileSync(file, "{}");
    fs.chmodSync(file, 0o640);
    await updateJson(file, () => ({ changed: true }));
    expect(fs.statSync(file).mode & 0o7777).toBe(0o640);
    const fresh = path.join(path.dirname(file), "fresh.json");
    await updateJson(fresh, () => ({}), { fileMode: 0o600 });
    expect(fs.statSync(fresh).mode & 0o7777).toBe(0o600);
  });

  it("as root, keeps a non-root owner and the file's set-id bits", async (ctx) => {
    skipUnless(ctx, { root: true });
    const file = path.join(makeRoot(), "config.json");
    fs.writeFileSync(file, "{}");
    fs.chownSync(file, 65534, 65534);
    fs.chmodSync(file, 0o2640);
    const result = await updateJson(file, () => ({ changed: true }));
    const stat = fs.statSync(file);
    expect([stat.uid, stat.gid, stat.mode & 0o7777, result.ownerKept]).toEqual([65534, 65534, 0o2640, true]);
  });

  it("follows a symlink: the file it leads to is replaced, the link kept", async () => {
    const root = makeRoot();
    fs.mkdirSync(path.join(root, "real"));
    fs.writeFileSync(path.join(root, "real", "state.json"), '{"v":1}');
    const link = path.join(root, "state.json");
    fs.symlinkSync(path.join("real", "state.json"), link);
    await updateJson<{ v: number }>(link, (data) => ({ v: data!.v + 1 }));
    expect(fs.lstatSync(link).isSymbolicLink()).toBe(true);
    expect(JSON.parse(fs.readFileSync(path.join(root, "real", "state.json"), "utf8"))).toEqual({ v: 2 });
  });

  it("a lock lost before the rename writes nothing and says so; the updater's throw leaves the file", async () => {
    const file = path.join(makeRoot(), "state.json");
    fs.writeFileSync(file, "old");
    const error = await updateFile(file, (_current, lock) => {
      fs.rmSync(lock.lockPath, { recursive: true });
      return "new";
    }).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(FileUpdateError);
    expect(error).toMatchObject({ code: "EMISSING", step: "rename", committed: false });
    expect(fs.readFileSync(file, "utf8")).toBe("old");
    expect(temps(file)).toEqual([]);
    await expect(updateFile(file, () => Promise.reject(new Error("changed my mind")))).rejects.toThrow("changed my mind");
    expect(fs.readFileSync(file, "utf8")).toBe("old");
    expect(fs.readdirSync(path.dirname(file))).toEqual(["state.json"]);
  });

  it("refuses what it cannot replace: a directory (EINVAL), a file over maxBytes (EFBIG), bad JSON (EJSON)", async () => {
    const root = makeRoot();
    fs.mkdirSync(path.join(root, "dir"));
    await expect(updateFile(path.join(root, "dir"), () => "x")).rejects.toMatchObject({ code: "EINVAL", step: "read" });
    fs.writeFileSync(path.join(root, "big"), "0123456789");
    await expect(updateFile(path.join(root, "big"), () => "x", { maxBytes: 4 })).rejects.toMatchObject({ code: "EFBIG" });
    fs.writeFileSync(path.join(root, "bad.json"), "{bad");
    const bad = await updateJson(path.join(root, "bad.json"), (data) => data).catch((thrown: unknown) => thrown);
    expect(bad).toBeInstanceOf(FileLockError);
    expect(bad).toMatchObject({ code: "EJSON", committed: false });
    expect(fs.readFileSync(path.join(root, "bad.json"), "utf8")).toBe("{bad");
  });

  it("durable by default: the temp's fsync, the rename, then the directory's fsync (strace)", (ctx) => {
    skipUnless(ctx, { linux: true, tools: ["strace"] });
    const root = makeRoot();
    const file = path.join(root, "state.json");
    const script = `
      const { updateFileSync } = require(${JSON.stringify(path.join(__dirname, "..", "dist", "index.js"))});
      updateFileSync(${JSON.stringify(file)}, () => "warm");
      process.stderr.write("EXACTLOCK-UPDATE-START\\n");
      updateFileSync(${JSON.stringify(file)}, () => "durable");
      process.stderr.write("EXACTLOCK-UPDATE-END\\n");
      updateFileSync(${JSON.stringify(file)}, () => "fast", { durable: false });
      process.stderr.write("EXACTLOCK-UPDATE-FAST\\n");`;
    const trace = path.join(root, "trace");
    const run = spawnSync("strace", ["-f", "-qq", "-e", "trace=fsync,fdatasync,rename,renameat,renameat2,write", "-o", trace, process.execPath, "-e", script], {
      encoding: "utf8",
    });
    expect(run.status, run.stderr).toBe(0);
    const lines = fs.readFileSync(trace, "utf8").split("\n");
    const at = (marker: string) => lines.findIndex((line) => line.includes(marker));
    const calls = (from: number, to: number) =>
      lines
        .slice(from + 1, to)
        .map((line) => /^\d+\s+(fsync|renameat2?|rename)\((.*)$/.exec(line))
        .filter((match) => match !== null)
        .map((match) => (match![1] === "fsync" ? "fsync" : match![2]!.includes(".upd.") ? "rename temp" : "rename lock"));
    const durable = calls(at("EXACTLOCK-UPDATE-START"), at("EXACTLOCK-UPDATE-END"));
    expect(durable.filter((call) => call !== "rename lock")).toEqual(["fsync", "rename temp", "fsync"]);
    const fast = calls(at("EXACTLOCK-UPDATE-END"), at("EXACTLOCK-UPDATE-FAST"));
    expect(fast.filter((call) => call !== "rename lock")).toEqual(["rename temp"]);
  });

  it("a killed writer's temp is removed by gc once its writer is proven dead; a live writer's is kept", async () => {
    const root = makeRoot();
    const dead = (await import("./helpers.ts")).deadPid;
    const uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
    const gone = `.state.json.upd.${await dead()}.${uuid}`;
    const live = `.state.json.upd.${process.pid}.${uuid}`;
    fs.writeFileSync(path.join(root, gone), "half written");
    fs.writeFileSync(path.join(root, live), "being written");
    const gc = await runGc(root);
    expect(gc.code).toBe(0);
    expect(gc.stdout).toContain(gone);
    expect(fs.readdirSync(root)).toEqual([live]);
  });

  it(
    "4 writers (Node and Bun) with SIGKILLs and 4 readers that never lock: every committed increment counted, no torn or empty read, no temp left after one more update",
    async () => {
      const root = makeRoot();
      const file = path.join(root, "counter.json");
      const log = path.join(root, "committed.log");
      const total = 4_000;
      const runtimes = [process.execPath, process.execPath, BUN, BUN];
      const writer = (runtime: string) => spawn(runtime, [path.join(FIXTURES, "update-worker.mjs"), file, log, String(total)], { stdio: "ignore" });
      const writers = runtimes.map(writer);
      const readers = Array.from({ length: 4 }, () =>
        spawn(process.execPath, [path.join(FIXTURES, "update-reader.mjs"), file], { stdio: ["ignore", "pipe", "inherit"] }),
      );
      const count = () => (fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, "utf8")) as { n: number }).n : 0);
      let kills = 0;
      while (count() < total) {
        await sleep(100 + Math.random() * 200);
        if (kills < 30 && count() < total - 200) {
          const at = Math.floor(Math.random() * writers.length);
          writers[at]!.kill("SIGKILL");
          writers[at] = writer(runtimes[at]!);
          kills += 1;
        }
      }
      await Promise.all(writers.map((child) => (child.exitCode === null ? new Promise((resolve) => child.once("exit", resolve)) : null)));
      const reports = await Promise.all(
        readers.map(
          (reader) =>
            new Promise<{ reads: number; torn: number; empty: number }>((resolve) => {
              let out = "";
              reader.stdout!.on("data", (chunk: Buffer) => (out += chunk));
              reader.once("exit", () => resolve(JSON.parse(out)));
              reader.kill("SIGTERM");
            }),
        ),
      );
      const data = JSON.parse(fs.readFileSync(file, "utf8")) as { n: number; ids: string[] };
      expect(data.n).toBe(total);
      expect(data.ids.length).toBe(data.n);
      expect(new Set(data.ids).size).toBe(data.ids.length);
      const committed = fs.readFileSync(log, "utf8").split("\n").filter(Boolean);
      const ids = new Set(data.ids);
      expect(committed.filter((id) => !ids.has(id))).toEqual([]);
      for (const report of reports) {
        expect(report.reads).toBeGreaterThan(0);
        expect(report).toMatchObject({ torn: 0, empty: 0 });
      }
      expect(kills).toBeGreaterThan(10);
      // One more update (the first of this file in this process) sweeps the temps of killed writers.
      await updateJson(file, (counter) => counter);
      expect(temps(file)).toEqual([]);
      expect(fs.existsSync(lockPathOf(file))).toBe(false);
    },
    240_000,
  );
});
