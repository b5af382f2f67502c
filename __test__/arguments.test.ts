/**
 * Every bad argument to every export, as one table: each row calls an
 * export with one bad argument and names the TypeError it must get —
 * `ERR_INVALID_ARG_TYPE` (wrong type) or `ERR_INVALID_ARG_VALUE` (right
 * type, bad value) — and a pattern its message must match (the argument's
 * name, and for values what was received). Async exports must reject, never
 * throw synchronously; sync exports must throw. Each row runs in a fresh
 * temp dir that must still be empty afterwards: bad input fails before
 * anything touches the disk.
 *
 * The table is keyed by export name and must cover every export of
 * lib/index.ts and of lib/testing.ts (the `exactlock/testing` seams): a new export without rows fails the coverage test. Exports
 * without arguments to validate (constants, classes, functions of no
 * arguments) say so, and the coverage test checks that they indeed are.
 */
import { readdirSync } from "node:fs";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import * as main from "../lib/index.ts";
import * as testing from "../lib/testing.ts";

/** Every export of the package: its main entry and `exactlock/testing`. */
const exactlock = { ...main, ...testing };
import { makeTempDir, removeDir } from "./cli-helpers.ts";

const TYPE = "ERR_INVALID_ARG_TYPE";
const VALUE = "ERR_INVALID_ARG_VALUE";
type Code = typeof TYPE | typeof VALUE;

/** One bad call: `call(dir)` runs in a fresh, empty temp dir. */
interface Row {
  label: string;
  code: Code;
  message: RegExp;
  call: (dir: string) => unknown;
}

type Entry =
  | { mode: "async" | "sync"; rows: Row[] }
  /** A function that answers `null` for a value that is no pid (upstream's contract), never throws. */
  | { mode: "null"; values: unknown[] }
  /** Nothing to validate: `kind` says why (checked by the coverage test). */
  | { mode: "none"; kind: "constant" | "class" | "no-arguments"; why: string };

const row = (label: string, code: Code, message: RegExp, call: (dir: string) => unknown): Row => ({
  label,
  code,
  message,
  call,
});

/** `name` as a regex source (escapes `.`, `[` and `]`). */
const re = (name: string) => name.replace(/[.[\]]/g, "\\$&");

const H256 = "h".repeat(256);
const H257 = "h".repeat(257);
/** 129 two-byte characters: 129 characters, 258 bytes. */
const E258 = "é".repeat(129);

// ---- rows shared by several exports, one generator per kind of argument ----

/** A path argument that must be a non-empty absolute string without NUL. */
function absolutePathRows(name: string, call: (value: unknown, dir: string) => unknown): Row[] {
  const n = re(name);
  return [
    row(`${name} undefined`, TYPE, new RegExp(`^${n} must be a string; received undefined$`), (d) => call(undefined, d)),
    row(`${name} null`, TYPE, new RegExp(`^${n} must be a string; received null$`), (d) => call(null, d)),
    row(`${name} 42`, TYPE, new RegExp(`^${n} must be a string; received type number \\(42\\)$`), (d) => call(42, d)),
    row(`${name} a URL`, TYPE, new RegExp(`^${n} must be a string; received an instance of URL$`), (d) =>
      call(new URL(`file://${d}/x`), d),
    ),
    row(`${name} ""`, VALUE, new RegExp(`^${n} must be a non-empty absolute path; received ""$`), (d) => call("", d)),
    row(`${name} relative`, VALUE, new RegExp(`^${n} must be an absolute path; received "rel/x"$`), (d) =>
      call("rel/x", d),
    ),
    row(`${name} with NUL`, VALUE, new RegExp(`^${n} must not contain NUL bytes; received ".*\\\\u0000b`), (d) =>
      call(path.join(d, "sub", "a\0b"), d),
    ),
  ];
}

/** A path argument of a native primitive: only its type is checked here (a bad value is a refusal). */
function pathStringRows(name: string, call: (value: unknown, dir: string) => unknown): Row[] {
  const n = re(name);
  return [
    row(`${name} undefined`, TYPE, new RegExp(`^${n} must be a string; received undefined$`), (d) => call(undefined, d)),
    row(`${name} 42`, TYPE, new RegExp(`^${n} must be a string; received type number \\(42\\)$`), (d) => call(42, d)),
    row(`${name} a Buffer`, TYPE, new RegExp(`^${n} must be a string; received an instance of Buffer$`), (d) =>
      call(Buffer.from(path.join(d, "x")), d),
    ),
  ];
}

/** A numeric option or argument: a finite number from 0 to 2^53 − 1. */
function numberRows(name: string, call: (value: unknown, dir: string) => unknown): Row[] {
  const n = re(name);
  const range = `^${n} must be a finite number from 0 to Number.MAX_SAFE_INTEGER; received`;
  return [
    row(`${name} "5"`, TYPE, new RegExp(`^${n} must be a number; received type string \\("5"\\)$`), (d) => call("5", d)),
    row(`${name} null`, TYPE, new RegExp(`^${n} must be a number; received null$`), (d) => call(null, d)),
    row(`${name} -1`, VALUE, new RegExp(`${range} -1$`), (d) => call(-1, d)),
    row(`${name} NaN`, VALUE, new RegExp(`${range} NaN$`), (d) => call(Number.NaN, d)),
    row(`${name} Infinity`, VALUE, new RegExp(`${range} Infinity$`), (d) => call(Number.POSITIVE_INFINITY, d)),
    row(`${name} 2^53`, VALUE, new RegExp(`${range} 9007199254740992$`), (d) => call(2 ** 53, d)),
  ];
}

interface HostIds {
  ownerHostId?: unknown;
  previousOwnerHostIds?: unknown;
}

/** `ownerHostId`: a non-empty string of at most 256 UTF-8 bytes. */
function ownerHostIdRows(call: (ids: HostIds, dir: string) => unknown): Row[] {
  const tooLong = "^ownerHostId must be at most 256 bytes in UTF-8; received";
  return [
    row("ownerHostId 42", TYPE, /^ownerHostId must be a string; received type number \(42\)$/, (d) =>
      call({ ownerHostId: 42 }, d),
    ),
    row('ownerHostId ""', VALUE, /^ownerHostId must be non-empty; received ""$/, (d) => call({ ownerHostId: "" }, d)),
    row("ownerHostId of 257 bytes", VALUE, new RegExp(`${tooLong} 257 bytes \\("h{40}…"\\)$`), (d) =>
      call({ ownerHostId: H257 }, d),
    ),
    row("ownerHostId of 129 characters, 258 bytes", VALUE, new RegExp(`${tooLong} 258 bytes`), (d) =>
      call({ ownerHostId: E258 }, d),
    ),
  ];
}

/** `previousOwnerHostIds`: an array of host identities. */
function previousHostIdRows(call: (ids: HostIds, dir: string) => unknown): Row[] {
  return [
    row("previousOwnerHostIds a string", TYPE, /^previousOwnerHostIds must be an array of strings; received type string/, (d) =>
      call({ previousOwnerHostIds: "old-host" }, d),
    ),
    row("previousOwnerHostIds [5]", TYPE, /^previousOwnerHostIds\[0\] must be a string; received type number \(5\)$/, (d) =>
      call({ previousOwnerHostIds: [5] }, d),
    ),
    row('previousOwnerHostIds ["ok", ""]', VALUE, /^previousOwnerHostIds\[1\] must be non-empty; received ""$/, (d) =>
      call({ previousOwnerHostIds: ["ok", ""] }, d),
    ),
    row(
      "previousOwnerHostIds with a 257-byte entry",
      VALUE,
      /^previousOwnerHostIds\[1\] must be at most 256 bytes in UTF-8; received 257 bytes/,
      (d) => call({ previousOwnerHostIds: ["ok", H257] }, d),
    ),
  ];
}

/** An options bag: an object (not null, not an array). */
function optionsObjectRows(call: (options: unknown, dir: string) => unknown): Row[] {
  return [
    row("options null", TYPE, /^options must be an object; received null$/, (d) => call(null, d)),
    row("options 5", TYPE, /^options must be an object; received type number \(5\)$/, (d) => call(5, d)),
    row("options an array", TYPE, /^options must be an object; received an array$/, (d) => call([], d)),
  ];
}

/** `retries`: a number from 0 to 2^53 − 1, or Infinity (waits until won or aborted). */
function retriesRows(call: (options: unknown, dir: string) => unknown): Row[] {
  const range = "^retries must be a number from 0 to Number.MAX_SAFE_INTEGER, or Infinity; received";
  return [
    row('retries "5"', TYPE, /^retries must be a number; received type string \("5"\)$/, (d) => call({ retries: "5" }, d)),
    row("retries null", TYPE, /^retries must be a number; received null$/, (d) => call({ retries: null }, d)),
    row("retries -1", VALUE, new RegExp(`${range} -1$`), (d) => call({ retries: -1 }, d)),
    row("retries -Infinity", VALUE, new RegExp(`${range} -Infinity$`), (d) => call({ retries: -Infinity }, d)),
    row("retries NaN", VALUE, new RegExp(`${range} NaN$`), (d) => call({ retries: Number.NaN }, d)),
    row("retries 2^53", VALUE, new RegExp(`${range} 9007199254740992$`), (d) => call({ retries: 2 ** 53 }, d)),
    row(
      "retries a proper-lockfile object",
      TYPE,
      /^retries must be a number \(the budget is retries × retryDelayMs; a proper-lockfile retries object maps to retries and retryDelayMs\); received an object$/,
      (d) => call({ retries: { retries: 5, minTimeout: 100 } }, d),
    ),
  ];
}

/** `timeout`: ms from 0 to 2^53 − 1, or Infinity. */
function timeoutRows(call: (options: unknown, dir: string) => unknown): Row[] {
  const range = "^timeout must be a number of ms from 0 to Number.MAX_SAFE_INTEGER, or Infinity; received";
  return [
    row('timeout "5"', TYPE, /^timeout must be a number; received type string \("5"\)$/, (d) => call({ timeout: "5" }, d)),
    row("timeout null", TYPE, /^timeout must be a number; received null$/, (d) => call({ timeout: null }, d)),
    row("timeout -1", VALUE, new RegExp(`${range} -1$`), (d) => call({ timeout: -1 }, d)),
    row("timeout NaN", VALUE, new RegExp(`${range} NaN$`), (d) => call({ timeout: Number.NaN }, d)),
    row("timeout -Infinity", VALUE, new RegExp(`${range} -Infinity$`), (d) => call({ timeout: -Infinity }, d)),
  ];
}

/** The file a lock is for: an absolute path or a file: URL; relative paths refused with the fix. */
function lockPathRows(name: string, call: (value: unknown, dir: string) => unknown): Row[] {
  const n = re(name);
  return [
    row(`${name} undefined`, TYPE, new RegExp(`^${n} must be a string or a file: URL; received undefined$`), (d) => call(undefined, d)),
    row(`${name} 42`, TYPE, new RegExp(`^${n} must be a string or a file: URL; received type number \\(42\\)$`), (d) => call(42, d)),
    row(`${name} an http: URL`, VALUE, new RegExp(`^${n} must be a file: URL when it is a URL; received "http://`), (d) =>
      call(new URL("http://example.com/x"), d),
    ),
    row(`${name} ""`, VALUE, new RegExp(`^${n} must be a non-empty absolute path; received ""$`), (d) => call("", d)),
    row(`${name} relative`, VALUE, new RegExp(`^${n} must be an absolute path \\(or a URL object with the file: scheme\\): resolve it first, e\\.g\\. path\\.resolve\\(p\\)`), (d) =>
      call("rel/x", d),
    ),
    row(`${name} a file: URL as a string`, VALUE, new RegExp(`^${n} is a file: URL written as a string, which is not a path: pass new URL\\(text\\)`), (d) =>
      call(pathToFileURL(path.join(d, "x")).href, d),
    ),
    // "/a/dir/" would lock "/a/dir/.lock" where "/a/dir" locks "/a/dir.lock": refused, never two locks of one path.
    ...[["a trailing slash", (d: string) => `${d}/sub/`], ["a trailing /.", (d: string) => `${d}/sub/.`], ["a trailing /..", (d: string) => `${d}/sub/..`], ["the root", () => "/"]].map(
      ([what, of]) =>
        row(`${name} with ${what as string}`, VALUE, new RegExp(`^${n} must end in a file's name, not in a path separator, "\\." or "\\.\\."`), (d) =>
          call((of as (d: string) => string)(d), d),
        ),
    ),
    row(`${name} a file: URL with a trailing slash`, VALUE, new RegExp(`^${n} must end in a file's name`), (d) =>
      call(pathToFileURL(`${d}/sub/`), d),
    ),
    row(`${name} with NUL`, VALUE, new RegExp(`^${n} must not contain NUL bytes; received ".*\\\\u0000b`), (d) =>
      call(path.join(d, "sub", "a\0b"), d),
    ),
  ];
}

/** Options exactlock does not have: named, with a hint for other libraries' names. */
function unknownOptionRows(call: (options: unknown, dir: string) => unknown): Row[] {
  return [
    row("option stale", VALUE, /^options\.stale is not an option of exactlock: did you mean staleMs\?/, (d) =>
      call({ stale: 10_000 }, d),
    ),
    row("option update", VALUE, /^options\.update is not an option of exactlock: exactlock keeps no heartbeat/, (d) =>
      call({ update: 5_000 }, d),
    ),
    row("option realpath", VALUE, /^options\.realpath is not an option of exactlock: paths need no resolving/, (d) =>
      call({ realpath: false }, d),
    ),
    row("option lockfilePath", VALUE, /^options\.lockfilePath is not an option of exactlock: the lock is always/, (d) =>
      call({ lockfilePath: `${d}/x.lock` }, d),
    ),
    row("option wait", VALUE, /^options\.wait is not an option of exactlock: did you mean timeout\?/, (d) =>
      call({ wait: 1000 }, d),
    ),
    row("option retryDelay (a typo)", VALUE, /^options\.retryDelay is not an option of exactlock: the options are staleMs, retries, retryDelayMs,/, (d) =>
      call({ retryDelay: 10 }, d),
    ),
  ];
}

/** The updater of updateFile / updateJson. */
function updaterRows(call: (dir: string, updater: unknown) => unknown): Row[] {
  return [
    row("updater undefined", TYPE, /^updater must be a function; received undefined$/, (d) => call(d, undefined)),
    row("updater 42", TYPE, /^updater must be a function; received type number \(42\)$/, (d) => call(d, 42)),
  ];
}

/** The options updateFile / updateJson add to the lock's. */
function updateOptionRows(call: (options: unknown, dir: string) => unknown): Row[] {
  return [
    row('durable "yes"', TYPE, /^durable must be a boolean; received type string \("yes"\)$/, (d) => call({ durable: "yes" }, d)),
    row('keepOwner "yes"', TYPE, /^keepOwner must be a boolean; received type string \("yes"\)$/, (d) =>
      call({ keepOwner: "yes" }, d),
    ),
    row("fileMode 0o10000", VALUE, /^fileMode must be permission bits from 0 to 0o7777; received 4096$/, (d) =>
      call({ fileMode: 0o10000 }, d),
    ),
    row("fileMode 1.5", VALUE, /^fileMode must be permission bits from 0 to 0o7777; received 1.5$/, (d) => call({ fileMode: 1.5 }, d)),
    row("maxBytes -1", VALUE, /^maxBytes must be a finite number from 0 to Number.MAX_SAFE_INTEGER; received -1$/, (d) =>
      call({ maxBytes: -1 }, d),
    ),
  ];
}

/** Every option of acquireLock / withFileLock. */
function lockOptionRows(call: (options: unknown, dir: string) => unknown): Row[] {
  return [
    ...optionsObjectRows(call),
    ...unknownOptionRows(call),
    ...numberRows("staleMs", (v, d) => call({ staleMs: v }, d)),
    ...retriesRows(call),
    ...numberRows("retryDelayMs", (v, d) => call({ retryDelayMs: v }, d)),
    ...timeoutRows(call),
    row("retryDelayMs 1e300", VALUE, /^retryDelayMs must be a finite number .* received 1e\+300$/, (d) =>
      call({ retryDelayMs: 1e300 }, d),
    ),
    ...ownerHostIdRows(call),
    ...previousHostIdRows(call),
    row('inlineFastPath "yes"', TYPE, /^inlineFastPath must be a boolean; received type string \("yes"\)$/, (d) =>
      call({ inlineFastPath: "yes" }, d),
    ),
    row("inlineFastPath null", TYPE, /^inlineFastPath must be a boolean; received null$/, (d) =>
      call({ inlineFastPath: null }, d),
    ),
    row('fence "yes"', TYPE, /^fence must be a boolean; received type string \("yes"\)$/, (d) => call({ fence: "yes" }, d)),
    row('mode "770"', TYPE, /^mode must be a number; received type string \("770"\)$/, (d) => call({ mode: "770" }, d)),
    ...[
      ["0o600 (no owner x)", 0o600, "0o600"],
      ["0o1770 (sticky)", 0o1770, "0o1770"],
      ["770 (decimal)", 770, "0o1402"],
      ["1.5", 1.5, "1.5"],
      ["-1", -1, "-1"],
    ].map(([what, value, shown]) =>
      row(`mode ${what}`, VALUE, new RegExp(`^mode must be permission bits from 0o700 to 0o777: .* received ${shown}$`), (d) =>
        call({ mode: value }, d),
      ),
    ),
    row("signal {}", TYPE, /^signal must be an AbortSignal; received an object$/, (d) => call({ signal: {} }, d)),
    row("signal null", TYPE, /^signal must be an AbortSignal; received null$/, (d) => call({ signal: null }, d)),
    row("onAcquired 5", TYPE, /^onAcquired must be a function; received type number \(5\)$/, (d) =>
      call({ onAcquired: 5 }, d),
    ),
    row('onContended "log"', TYPE, /^onContended must be a function; received type string \("log"\)$/, (d) =>
      call({ onContended: "log" }, d),
    ),
    row("onCompromised true", TYPE, /^onCompromised must be a function; received type boolean \(true\)$/, (d) =>
      call({ onCompromised: true }, d),
    ),
  ];
}

// ---- GC arguments ----

const fileIn = (dir: string) => path.join(dir, "sub", "state.json");
const lockDirIn = (dir: string) => path.join(dir, "sub", "state.json.lock");

const TOKEN = { pid: 12345, timestamp: 1 };
const IDENTITY = {
  rootDev: "1",
  rootIno: "2",
  infoDev: "1",
  infoIno: "3",
  infoNlink: "1",
  infoSize: "40",
  infoMtimeNs: "1700000000000000000",
  infoCtimeNs: "1700000000000000000",
  infoSha256: "0".repeat(64),
};

/** `expected` of removeFileLockDirForGc: an owner record as an observation returns it. */
function ownerTokenRows(call: (token: unknown, dir: string) => unknown): Row[] {
  const bad = (label: string, code: Code, message: RegExp, token: unknown) => row(label, code, message, (d) => call(token, d));
  return [
    bad("expected undefined", TYPE, /^expected must be an object; received undefined$/, undefined),
    bad("expected null", TYPE, /^expected must be an object; received null$/, null),
    bad('expected "token"', TYPE, /^expected must be an object; received type string/, "token"),
    bad("expected {}", TYPE, /^expected\.pid must be a number; received undefined$/, {}),
    bad('expected.pid "1"', TYPE, /^expected\.pid must be a number; received type string \("1"\)$/, { ...TOKEN, pid: "1" }),
    bad("expected.pid 0", VALUE, /^expected\.pid must be a positive integer; received 0$/, { ...TOKEN, pid: 0 }),
    bad("expected.pid 1.5", VALUE, /^expected\.pid must be a positive integer; received 1\.5$/, { ...TOKEN, pid: 1.5 }),
    bad("expected.timestamp missing", TYPE, /^expected\.timestamp must be a number; received undefined$/, { pid: 1 }),
    bad("expected.timestamp NaN", VALUE, /^expected\.timestamp must be a finite number; received NaN$/, {
      ...TOKEN,
      timestamp: Number.NaN,
    }),
    bad("expected.owner_token 7", TYPE, /^expected\.owner_token must be a string; received type number \(7\)$/, {
      ...TOKEN,
      owner_token: 7,
    }),
    bad('expected.start_time ""', VALUE, /^expected\.start_time must be non-empty; received ""$/, {
      ...TOKEN,
      start_time: "",
    }),
    bad("expected.owner_host_id null", TYPE, /^expected\.owner_host_id must be a string; received null$/, {
      ...TOKEN,
      owner_host_id: null,
    }),
  ];
}

/** `preVerdictIdentity`: nine decimal strings and a SHA-256 in hex. */
function identityRows(call: (identity: unknown, dir: string) => unknown): Row[] {
  const n = "preVerdictIdentity";
  const field = (key: string, value: unknown, code: Code, says: string) =>
    row(`${n}.${key} ${JSON.stringify(value)}`, code, new RegExp(`^${n}\\.${key} ${says}`), (d) =>
      call({ ...IDENTITY, [key]: value }, d),
    );
  const unsigned = "must be an unsigned 64-bit decimal string; received";
  return [
    row(`${n} null`, TYPE, /^preVerdictIdentity must be an object; received null$/, (d) => call(null, d)),
    row(`${n} a string`, TYPE, /^preVerdictIdentity must be an object; received type string/, (d) => call("id", d)),
    field("infoDev", undefined, TYPE, "must be a string; received undefined$"),
    field("rootIno", 2, TYPE, "must be a string; received type number \\(2\\)$"),
    field("rootDev", "12x", VALUE, `${unsigned} "12x"$`),
    field("infoNlink", "-1", VALUE, `${unsigned} "-1"$`),
    field("infoIno", "18446744073709551616", VALUE, `${unsigned} "18446744073709551616"$`),
    field("infoMtimeNs", "1.5", VALUE, 'must be a decimal integer string; received "1\\.5"$'),
    field("infoSha256", "abc", VALUE, 'must be 64 hex digits; received "abc"$'),
    field("infoSha256", "g".repeat(64), VALUE, 'must be 64 hex digits; received "g{40}…"$'),
  ];
}

// ---- native primitives ----

function renameRows(rename: (src: unknown, dst: unknown) => unknown): Row[] {
  return [
    ...pathStringRows("src", (v, d) => rename(v, path.join(d, "dst"))),
    ...pathStringRows("dst", (v, d) => rename(path.join(d, "src"), v)),
  ];
}

function snapshotRows(remove: (path: unknown, snapshot: unknown) => unknown): Row[] {
  const entry = { relativePath: "", kind: "directory", dev: "1", ino: "2", nlink: "2", size: "0", mtimeNs: "0", ctimeNs: "0" };
  const good = { rootDev: "1", rootIno: "2", entries: [entry] };
  const bad = (label: string, message: RegExp, snapshot: unknown) =>
    row(label, TYPE, message, (d) => remove(path.join(d, "tree"), snapshot));
  return [
    ...pathStringRows("path", (v) => remove(v, good)),
    bad("snapshot undefined", /^snapshot must be an object; received undefined$/, undefined),
    bad("snapshot null", /^snapshot must be an object; received null$/, null),
    bad('snapshot "snapshot"', /^snapshot must be an object; received type string/, "snapshot"),
    bad("snapshot.rootDev a number", /^snapshot\.rootDev must be a string; received type number \(1\)$/, { ...good, rootDev: 1 }),
    bad("snapshot.entries missing", /^snapshot\.entries must be an array; received undefined$/, { rootDev: "1", rootIno: "2" }),
    bad("snapshot.entries[0] a string", /^snapshot\.entries\[0\] must be an object; received type string/, { ...good, entries: ["x"] }),
    bad("snapshot.entries[0].size a number", /^snapshot\.entries\[0\]\.size must be a string; received type number \(0\)$/, {
      ...good,
      entries: [{ ...entry, size: 0 }],
    }),
    bad("snapshot.entries[0].sha256 null", /^snapshot\.entries\[0\]\.sha256 must be a string; received null$/, {
      ...good,
      entries: [{ ...entry, sha256: null }],
    }),
  ];
}

// ---- the table ----

const withFn = async () => "ran";

const TABLE: Record<string, Entry> = {
  acquireLock: {
    mode: "async",
    rows: [
      ...lockPathRows("filePath", (v) => exactlock.acquireLock(v as string)),
      ...lockOptionRows((o, d) => exactlock.acquireLock(fileIn(d), o as never)),
    ],
  },
  tryAcquireLock: {
    mode: "async",
    rows: [
      ...lockPathRows("filePath", (v) => exactlock.tryAcquireLock(v as string)),
      ...lockOptionRows((o, d) => exactlock.tryAcquireLock(fileIn(d), o as never)).filter(
        // tryAcquireLock sets timeout itself (0): a bad one given is replaced, not refused
        (r) => !r.label.startsWith("timeout"),
      ),
    ],
  },
  acquireFileLock: {
    mode: "async",
    rows: [
      ...lockPathRows("filePath", (v) => exactlock.acquireFileLock(v as string)),
      ...lockOptionRows((o, d) => exactlock.acquireFileLock(fileIn(d), o as never)),
    ],
  },
  withFileLock: {
    mode: "async",
    rows: [
      ...lockPathRows("filePath", (v) => exactlock.withFileLock(v as string, withFn)),
      row("fn undefined", TYPE, /^fn must be a function; received undefined$/, (d) =>
        exactlock.withFileLock(fileIn(d), undefined as never),
      ),
      row('fn "nope"', TYPE, /^fn must be a function; received type string \("nope"\)$/, (d) =>
        exactlock.withFileLock(fileIn(d), "nope" as never),
      ),
      row("fn a promise", TYPE, /^fn must be a function; received an instance of Promise$/, (d) =>
        exactlock.withFileLock(fileIn(d), Promise.resolve() as never),
      ),
      ...lockOptionRows((o, d) => exactlock.withFileLock(fileIn(d), withFn, o as never)),
    ],
  },
  acquireLockSync: {
    mode: "sync",
    rows: [
      ...lockPathRows("filePath", (v) => exactlock.acquireLockSync(v as string)),
      ...lockOptionRows((o, d) => exactlock.acquireLockSync(fileIn(d), o as never)).filter(
        // (a signal or onContended of the wrong type fails as in acquireLock, below)
        (r) => !r.label.startsWith("signal") && !r.label.startsWith("onContended"),
      ),
      row("signal (any AbortSignal)", VALUE, /^signal cannot serve a synchronous acquisition: it needs the event loop/, (d) =>
        exactlock.acquireLockSync(fileIn(d), { signal: new AbortController().signal }),
      ),
      row("onContended (any function)", VALUE, /^onContended cannot serve a synchronous acquisition/, (d) =>
        exactlock.acquireLockSync(fileIn(d), { onContended: () => {} }),
      ),
    ],
  },
  withFileLockSync: {
    mode: "sync",
    rows: [
      ...lockPathRows("filePath", (v) => exactlock.withFileLockSync(v as string, () => 0)),
      row("fn undefined", TYPE, /^fn must be a function; received undefined$/, (d) =>
        exactlock.withFileLockSync(fileIn(d), undefined as never),
      ),
      ...lockOptionRows((o, d) => exactlock.withFileLockSync(fileIn(d), () => 0, o as never)).filter(
        (r) => !r.label.startsWith("signal") && !r.label.startsWith("onContended"),
      ),
    ],
  },
  updateFile: {
    mode: "async",
    rows: [
      ...lockPathRows("filePath", (v) => exactlock.updateFile(v as string, () => undefined)),
      ...updaterRows((d, u) => exactlock.updateFile(fileIn(d), u as never)),
      ...lockOptionRows((o, d) => exactlock.updateFile(fileIn(d), () => undefined, o as never)),
      ...updateOptionRows((o, d) => exactlock.updateFile(fileIn(d), () => undefined, o as never)),
      row('encoding "utf-9"', VALUE, /^encoding must be a Buffer encoding/, (d) =>
        exactlock.updateFile(fileIn(d), () => undefined, { encoding: "utf-9" as never }),
      ),
    ],
  },
  updateFileSync: {
    mode: "sync",
    rows: [
      ...lockPathRows("filePath", (v) => exactlock.updateFileSync(v as string, () => undefined)),
      ...updaterRows((d, u) => exactlock.updateFileSync(fileIn(d), u as never)),
      ...lockOptionRows((o, d) => exactlock.updateFileSync(fileIn(d), () => undefined, o as never)).filter(
        (r) => !r.label.startsWith("signal") && !r.label.startsWith("onContended"),
      ),
      ...updateOptionRows((o, d) => exactlock.updateFileSync(fileIn(d), () => undefined, o as never)),
    ],
  },
  updateJson: {
    mode: "async",
    rows: [
      ...lockPathRows("filePath", (v) => exactlock.updateJson(v as string, () => undefined)),
      ...updaterRows((d, u) => exactlock.updateJson(fileIn(d), u as never)),
      ...lockOptionRows((o, d) => exactlock.updateJson(fileIn(d), () => undefined, o as never)),
      ...updateOptionRows((o, d) => exactlock.updateJson(fileIn(d), () => undefined, o as never)),
      row("space {}", TYPE, /^space must be a number or a string; received object$/, (d) =>
        exactlock.updateJson(fileIn(d), () => undefined, { space: {} as never }),
      ),
      row("fenceKey 5", TYPE, /^fenceKey must be a string; received type number \(5\)$/, (d) =>
        exactlock.updateJson(fileIn(d), () => undefined, { fenceKey: 5 as never }),
      ),
    ],
  },
  updateJsonSync: {
    mode: "sync",
    rows: [
      ...lockPathRows("filePath", (v) => exactlock.updateJsonSync(v as string, () => undefined)),
      ...updaterRows((d, u) => exactlock.updateJsonSync(fileIn(d), u as never)),
      ...updateOptionRows((o, d) => exactlock.updateJsonSync(fileIn(d), () => undefined, o as never)),
    ],
  },
  FileUpdateError: {
    mode: "none",
    kind: "class",
    why: "an error class exactlock constructs; its arguments only shape a message",
  },
  inspectLock: {
    mode: "async",
    rows: [
      ...lockPathRows("filePath", (v) => exactlock.inspectLock(v as string)),
      ...optionsObjectRows((o, d) => exactlock.inspectLock(fileIn(d), o as never)),
      ...unknownOptionRows((o, d) => exactlock.inspectLock(fileIn(d), o as never)),
      ...numberRows("staleMs", (v, d) => exactlock.inspectLock(fileIn(d), { staleMs: v as number })),
      ...ownerHostIdRows((ids, d) => exactlock.inspectLock(fileIn(d), ids as never)),
      ...previousHostIdRows((ids, d) => exactlock.inspectLock(fileIn(d), ids as never)),
    ],
  },
  isLocked: {
    mode: "async",
    rows: [
      ...lockPathRows("filePath", (v) => exactlock.isLocked(v as string)),
      ...optionsObjectRows((o, d) => exactlock.isLocked(fileIn(d), o as never)),
      ...unknownOptionRows((o, d) => exactlock.isLocked(fileIn(d), o as never)),
      ...numberRows("staleMs", (v, d) => exactlock.isLocked(fileIn(d), { staleMs: v as number })),
      ...ownerHostIdRows((ids, d) => exactlock.isLocked(fileIn(d), ids as never)),
      ...previousHostIdRows((ids, d) => exactlock.isLocked(fileIn(d), ids as never)),
    ],
  },
  readFileLockInfoForGc: {
    mode: "async",
    rows: absolutePathRows("lockDir", (v) => exactlock.readFileLockInfoForGc(v as string)),
  },
  readFileLockObservationForGc: {
    mode: "async",
    rows: absolutePathRows("lockDir", (v) => exactlock.readFileLockObservationForGc(v as string)),
  },
  removeFileLockDirForGc: {
    mode: "async",
    rows: [
      ...absolutePathRows("lockDir", (v) => exactlock.removeFileLockDirForGc(v as string, TOKEN, IDENTITY)),
      ...ownerTokenRows((t, d) => exactlock.removeFileLockDirForGc(lockDirIn(d), t as never, IDENTITY)),
      ...identityRows((i, d) => exactlock.removeFileLockDirForGc(lockDirIn(d), TOKEN, i as never)),
    ],
  },
  genericFileLockDirStaleVerdict: {
    mode: "async",
    rows: [
      ...absolutePathRows("lockDir", (v) => exactlock.genericFileLockDirStaleVerdict(v as string)),
      ...numberRows("staleMs", (v, d) => exactlock.genericFileLockDirStaleVerdict(lockDirIn(d), v as number)),
      ...[ownerHostIdRows, previousHostIdRows].flatMap((rows) =>
        rows((ids, d) =>
          exactlock.genericFileLockDirStaleVerdict(
            lockDirIn(d),
            1000,
            ids.ownerHostId as string,
            ids.previousOwnerHostIds as string[],
          ),
        ),
      ),
    ],
  },
  genericFileLockDirIsStale: {
    mode: "async",
    rows: [
      ...absolutePathRows("lockDir", (v) => exactlock.genericFileLockDirIsStale(v as string)),
      ...numberRows("staleMs", (v, d) => exactlock.genericFileLockDirIsStale(lockDirIn(d), v as number)),
      ...ownerHostIdRows((ids, d) => exactlock.genericFileLockDirIsStale(lockDirIn(d), 1000, ids.ownerHostId as string)),
    ],
  },
  processStartTime: {
    mode: "null",
    values: ["1", null, undefined, {}, 0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31],
  },
  describeHolder: {
    mode: "sync",
    rows: [
      row("holder 42", TYPE, /^holder must be an object, null or undefined; received type number$/, () =>
        exactlock.describeHolder(42 as never),
      ),
      row('holder "live"', TYPE, /^holder must be an object, null or undefined; received type string$/, () =>
        exactlock.describeHolder("live" as never),
      ),
      row('hostAware "yes"', TYPE, /^hostAware must be a boolean; received type string$/, () =>
        exactlock.describeHolder(undefined, "yes" as never),
      ),
      row("hostAware null", TYPE, /^hostAware must be a boolean; received null$/, () =>
        exactlock.describeHolder(undefined, null as never),
      ),
    ],
  },
  injectFaultForTesting: {
    mode: "sync",
    rows: [
      row("step 5", TYPE, /^step must be a string; received type number \(5\)$/, () =>
        exactlock.injectFaultForTesting(5 as never, "EIO"),
      ),
      row("code undefined", TYPE, /^code must be a string; received undefined$/, () =>
        exactlock.injectFaultForTesting("observe", undefined as never),
      ),
      row("an unknown step", VALUE, /^step and code must name a known fault step and errno code; received "nope" and "EIO"$/, () =>
        exactlock.injectFaultForTesting("nope", "EIO"),
      ),
      row("an unknown code", VALUE, /^step and code must name .*; received "observe" and "EWHAT"$/, () =>
        exactlock.injectFaultForTesting("observe", "EWHAT"),
      ),
      row('times "1"', TYPE, /^times must be a number; received type string \("1"\)$/, () =>
        exactlock.injectFaultForTesting("observe", "EIO", "1" as never),
      ),
      row("times -1", VALUE, /^times must be an integer from 0 to 4294967295; received -1$/, () =>
        exactlock.injectFaultForTesting("observe", "EIO", -1),
      ),
      row("times 1.5", VALUE, /^times must be an integer .*; received 1\.5$/, () =>
        exactlock.injectFaultForTesting("observe", "EIO", 1.5),
      ),
      row("times 2^32", VALUE, /^times must be an integer .*; received 4294967296$/, () =>
        exactlock.injectFaultForTesting("observe", "EIO", 2 ** 32),
      ),
    ],
  },
  renameNoReplacePath: { mode: "sync", rows: renameRows((s, d) => exactlock.renameNoReplacePath(s as string, d as string)) },
  renameNoReplacePathAsync: {
    mode: "async",
    rows: renameRows((s, d) => exactlock.renameNoReplacePathAsync(s as string, d as string)),
  },
  renameNoReplace: { mode: "async", rows: renameRows((s, d) => exactlock.renameNoReplace(s as string, d as string)) },
  renameDirectoryNoReplacePath: {
    mode: "sync",
    rows: renameRows((s, d) => exactlock.renameDirectoryNoReplacePath(s as string, d as string)),
  },
  renameDirectoryNoReplacePathAsync: {
    mode: "async",
    rows: renameRows((s, d) => exactlock.renameDirectoryNoReplacePathAsync(s as string, d as string)),
  },
  snapshotDirectoryTree: {
    mode: "sync",
    rows: pathStringRows("path", (v) => exactlock.snapshotDirectoryTree(v as string)),
  },
  snapshotDirectoryTreeAsync: {
    mode: "async",
    rows: pathStringRows("path", (v) => exactlock.snapshotDirectoryTreeAsync(v as string)),
  },
  exactRemoveDirectoryTree: {
    mode: "sync",
    rows: snapshotRows((p, s) => exactlock.exactRemoveDirectoryTree(p as string, s as never)),
  },
  exactRemoveDirectoryTreeAsync: {
    mode: "async",
    rows: snapshotRows((p, s) => exactlock.exactRemoveDirectoryTreeAsync(p as string, s as never)),
  },
  probeFilesystem: { mode: "async", rows: absolutePathRows("dir", (v) => exactlock.probeFilesystem(v as string)) },
  waitPidExitNs: {
    mode: "async",
    rows: [
      row('pid "1"', TYPE, /^pid must be a number; received type string \("1"\)$/, () => exactlock.waitPidExitNs("1" as never)),
      row("pid undefined", TYPE, /^pid must be a number; received undefined$/, () =>
        exactlock.waitPidExitNs(undefined as never),
      ),
      row("pid 0", VALUE, /^pid must be an integer from 1 to 2147483647; received 0$/, () => exactlock.waitPidExitNs(0)),
      row("pid 1.5", VALUE, /^pid must be an integer from 1 to 2147483647; received 1\.5$/, () => exactlock.waitPidExitNs(1.5)),
      row("pid 2^31", VALUE, /^pid must be an integer .*; received 2147483648$/, () => exactlock.waitPidExitNs(2 ** 31)),
      row('timeoutMs "5"', TYPE, /^timeoutMs must be a number; received type string \("5"\)$/, () =>
        exactlock.waitPidExitNs(process.pid, "5" as never),
      ),
      row("timeoutMs -1", VALUE, /^timeoutMs must be an integer from 0 to 4294967295; received -1$/, () =>
        exactlock.waitPidExitNs(process.pid, -1),
      ),
    ],
  },
  injectDelayForTesting: {
    mode: "sync",
    rows: [
      row("step 5", TYPE, /^step must be a string; received type number \(5\)$/, () =>
        exactlock.injectDelayForTesting(5 as never, 10),
      ),
      row("ms undefined", TYPE, /^ms must be a number; received undefined$/, () =>
        exactlock.injectDelayForTesting("attempt", undefined as never),
      ),
      row("ms -1", VALUE, /^ms must be an integer from 0 to 4294967295; received -1$/, () =>
        exactlock.injectDelayForTesting("attempt", -1),
      ),
      row("only 7", TYPE, /^only must be a string; received type number \(7\)$/, () =>
        exactlock.injectDelayForTesting("attempt", 10, 7 as never),
      ),
      row("times 1.5", VALUE, /^times must be an integer .*; received 1\.5$/, () =>
        exactlock.injectDelayForTesting("attempt", 10, undefined, 1.5),
      ),
      row("an unknown step", VALUE, /^step must name a known delay step; received "nope"$/, () =>
        exactlock.injectDelayForTesting("nope", 10),
      ),
    ],
  },
  reapOrphanedLockStagingDirs: {
    mode: "async",
    rows: absolutePathRows("lockPath", (value) => exactlock.reapOrphanedLockStagingDirs(value as string)),
  },
  inspectFileLockStagingDir: {
    mode: "async",
    rows: [
      ...absolutePathRows("stagingPath", (value) => exactlock.inspectFileLockStagingDir(value as string)),
      row("probe 5", TYPE, /^probe must be a function; received type number \(5\)$/, (d) =>
        exactlock.inspectFileLockStagingDir(path.join(d, "f.lock.pending.1.x"), 5 as never),
      ),
      row('remove "yes"', TYPE, /^remove must be a boolean; received type string \("yes"\)$/, (d) =>
        exactlock.inspectFileLockStagingDir(path.join(d, "f.lock.pending.1.x"), undefined, "yes" as never),
      ),
    ],
  },
  fileLockStagingOwnerPid: {
    mode: "sync",
    rows: [
      row("name 5", TYPE, /^name must be a string; received type number \(5\)$/, () =>
        exactlock.fileLockStagingOwnerPid(5 as never),
      ),
      row("name undefined", TYPE, /^name must be a string; received undefined$/, () =>
        exactlock.fileLockStagingOwnerPid(undefined as never),
      ),
    ],
  },
  clearFaultsForTesting: { mode: "none", kind: "no-arguments", why: "takes no arguments" },
  nativeVersion: { mode: "none", kind: "no-arguments", why: "takes no arguments" },
  nativePlatform: { mode: "none", kind: "no-arguments", why: "takes no arguments" },
  inlineFastPathPossible: { mode: "none", kind: "no-arguments", why: "takes no arguments" },
  FileLockAcquireError: {
    mode: "none",
    kind: "class",
    why: "an error class exactlock constructs; its arguments only shape a message",
  },
  FileLockError: { mode: "none", kind: "class", why: "an error class exactlock constructs; its arguments only shape a message" },
  FileLockTestHooks: { mode: "none", kind: "constant", why: "an object of test seams, assigned to, not called" },
  FILE_LOCK_RELEASE_RETRY_ATTEMPTS: { mode: "none", kind: "constant", why: "a number" },
  FILE_LOCK_RELEASE_RETRY_DELAY_MS: { mode: "none", kind: "constant", why: "a number" },
};

const exported = exactlock as unknown as Record<string, unknown>;

/** The runtime exports of lib/index.ts and lib/testing.ts (module-interop keys left out). */
async function exportNames(): Promise<string[]> {
  const modules = [await import("../lib/index.ts"), await import("../lib/testing.ts")] as Record<string, unknown>[];
  return modules
    .flatMap((module) => Object.keys(module))
    .filter((name) => name !== "default" && name !== "__esModule")
    .sort();
}

function isClass(value: unknown): boolean {
  return typeof value === "function" && /^class\b/.test(Function.prototype.toString.call(value));
}

describe("the table covers every export of lib/index.ts and lib/testing.ts", () => {
  it("has an entry for each export, and none for a name that is not exported", async () => {
    const names = await exportNames();
    expect(names.length).toBeGreaterThan(20);
    expect(Object.keys(TABLE).sort()).toEqual(names);
  });

  it("gives every entry with rows at least one row, and rows only to functions", () => {
    for (const [name, entry] of Object.entries(TABLE)) {
      if (entry.mode === "async" || entry.mode === "sync") {
        expect(entry.rows.length, name).toBeGreaterThan(0);
        expect(typeof exported[name], name).toBe("function");
      }
    }
  });

  it("marks as async exactly the async functions", () => {
    for (const [name, entry] of Object.entries(TABLE)) {
      const isAsync = (exported[name] as { constructor?: { name?: string } } | undefined)?.constructor?.name === "AsyncFunction";
      expect(entry.mode === "async", name).toBe(isAsync);
    }
  });

  it("says why for each export without rows, and the reason holds", () => {
    for (const [name, entry] of Object.entries(TABLE)) {
      if (entry.mode !== "none") continue;
      const value = exported[name];
      if (entry.kind === "constant") expect(typeof value, name).not.toBe("function");
      if (entry.kind === "class") expect(isClass(value), name).toBe(true);
      if (entry.kind === "no-arguments") {
        expect(typeof value, name).toBe("function");
        expect(isClass(value), name).toBe(false);
        expect((value as () => unknown).length, name).toBe(0);
      }
    }
  });
});

let dir: string;
beforeEach(() => {
  dir = makeTempDir("args");
});
afterEach(() => {
  exactlock.clearFaultsForTesting();
  removeDir(dir);
});

/** Runs `row` as `mode` says and returns what it threw or rejected with. */
async function failureOf(mode: "async" | "sync", call: () => unknown): Promise<unknown> {
  if (mode === "sync") {
    try {
      call();
    } catch (error) {
      return error;
    }
    throw new Error("expected a throw, but the call returned");
  }
  let pending: unknown;
  try {
    pending = call();
  } catch (error) {
    throw new Error(`an async export threw synchronously instead of rejecting: ${String(error)}`);
  }
  expect(pending).toBeInstanceOf(Promise);
  return (pending as Promise<unknown>).then(
    () => {
      throw new Error("expected a rejection, but the promise resolved");
    },
    (error: unknown) => error,
  );
}

const cases = Object.entries(TABLE).flatMap(([name, entry]) =>
  entry.mode === "async" || entry.mode === "sync"
    ? entry.rows.map((r) => ({ name, mode: entry.mode as "async" | "sync", ...r }))
    : [],
);

describe("every bad argument fails with a coded TypeError, before the disk", () => {
  it.each(cases)("$name: $label → $code", async ({ mode, code, message, call }) => {
    const error = await failureOf(mode, () => call(dir));
    expect(error).toBeInstanceOf(TypeError);
    expect(error).toMatchObject({ code });
    expect((error as Error).message).toMatch(message);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("processStartTime answers null, never throws, for a value that is no pid (the original's contract)", () => {
    const entry = TABLE.processStartTime;
    if (entry?.mode !== "null") throw new Error("processStartTime has no null row");
    for (const value of entry.values) expect(exactlock.processStartTime(value as number), String(value)).toBeNull();
  });
});

describe("the 256-byte bound on host identities", () => {
  const ascii256 = H256;
  /** 128 two-byte characters: 256 bytes exactly. */
  const utf8256 = "é".repeat(128);

  it("accepts 256 bytes: acquires and releases a real lock whose record names the host", async () => {
    const file = path.join(dir, "state.json");
    const release = await exactlock.acquireLock(file, { ownerHostId: ascii256, previousOwnerHostIds: [utf8256] });
    const inspection = await exactlock.inspectLock(file, { ownerHostId: ascii256, previousOwnerHostIds: [utf8256] });
    expect(inspection.holder).toMatchObject({ pid: process.pid, ownerHostId: ascii256, foreign: false });
    expect(await exactlock.genericFileLockDirIsStale(`${file}.lock`, 1000, utf8256)).toBe(false);
    await release();
    expect(await exactlock.withFileLock(file, withFn, { ownerHostId: utf8256 })).toBe("ran");
    expect(readdirSync(dir)).toEqual([]);
  });

  it("rejects 257 bytes (ASCII, and 256 bytes of two-byte characters plus one) before the disk", async () => {
    const file = path.join(dir, "sub", "state.json");
    for (const id of [H257, `${utf8256}x`]) {
      await expect(exactlock.acquireLock(file, { ownerHostId: id })).rejects.toMatchObject({
        name: "TypeError",
        code: VALUE,
        message: expect.stringMatching(/^ownerHostId must be at most 256 bytes in UTF-8; received 257 bytes/),
      });
      await expect(exactlock.acquireLock(file, { previousOwnerHostIds: [id] })).rejects.toMatchObject({
        code: VALUE,
        message: expect.stringMatching(/^previousOwnerHostIds\[0\] must be at most 256 bytes/),
      });
    }
    expect(readdirSync(dir)).toEqual([]);
  });
});
