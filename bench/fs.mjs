// npm run bench -- --fs tmpfs,xfs,btrfs,sshfs [other bench options]
//
// The whole bench on the temp dir first (as `npm run bench`), then scenarios (a)–(d) again on
// each named filesystem, mounted for the run by __test__/fs-matrix/mounts.mjs (as root; loop
// images, a loopback sshd) and removed after, each library beside the others; then one table
// of the four scenarios per filesystem with exactlock's ratio to each library.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { FILESYSTEMS, mountFs, unmountAll, whyNotMountable } from "../__test__/fs-matrix/mounts.mjs";
import { fmtMs, ratio, table } from "./lib.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const LIBS = ["exactlock", "proper-lockfile", "lockfile"];

/** The bench's own arguments without `--fs LIST`, `--dir D`, `--json F` and `--only X`. */
function passedOn(argv) {
  const out = [];
  for (let i = 0; i < argv.length; i++) {
    if (["--fs", "--dir", "--json", "--only"].includes(argv[i])) i++;
    else if (!/^--(fs|only)=/.test(argv[i])) out.push(argv[i]);
  }
  return out;
}

function runBench(args, label) {
  const json = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-bench-fs-")), "out.json");
  console.log(`\n######## ${label}\n`);
  const result = spawnSync(process.execPath, [path.join(HERE, "run.mjs"), ...args, "--json", json], { stdio: "inherit" });
  const parsed = fs.existsSync(json) ? JSON.parse(fs.readFileSync(json, "utf8")) : null;
  fs.rmSync(path.dirname(json), { recursive: true, force: true });
  return { status: result.status, results: parsed };
}

/** One row per filesystem: the figure of each library and exactlock's ratio to the others. */
function rowsOf(fsName, results) {
  const s = results?.scenarios ?? {};
  const cell = (value, format) => (Number.isFinite(value) ? format(value) : "n/a");
  const row = (scenario, pick, format, better) => {
    const values = LIBS.map((lib) => pick(s[scenario]?.[lib] ?? s[scenario]?.stats?.[lib]));
    const [ex, pl, lf] = values;
    // Ratios read "exactlock is N× better": time ÷ time (theirs over ours), rate ÷ rate.
    const r = (other) => (better === "lower" ? ratio(other, ex) : ratio(ex, other));
    return [fsName, scenario, ...values.map((v) => cell(v, format)), r(pl), r(lf)];
  };
  return [
    row("uncontended", (x) => x?.median, fmtMs, "lower"),
    row("contended", (x) => x?.perSecond, (v) => `${v.toFixed(0)}/s`, "higher"),
    row("handoff", (x) => x?.median, fmtMs, "lower"),
    row("crash", (x) => x?.median, fmtMs, "lower"),
  ];
}

export async function benchFilesystems(argv) {
  const at = argv.findIndex((a) => a === "--fs" || a.startsWith("--fs="));
  const list = (argv[at].includes("=") ? argv[at].split("=")[1] : argv[at + 1] ?? "").split(",").filter(Boolean);
  const unknown = list.filter((kind) => !FILESYSTEMS.includes(kind));
  if (list.length === 0 || unknown.length > 0) {
    console.error(`bench: --fs wants a comma-separated list of ${FILESYSTEMS.join(", ")}; got ${JSON.stringify(list)}`);
    return 2;
  }
  const rest = passedOn(argv);
  const rows = [];
  const notes = [];
  let failed = false;

  const home = runBench(rest, "the temp dir (the full bench)");
  failed ||= home.status !== 0;
  rows.push(...rowsOf(`${home.results?.machine?.filesystem?.split(" ")[0] ?? "temp dir"} (temp dir)`, home.results));

  try {
    for (const kind of list) {
      const why = whyNotMountable(kind);
      if (why) {
        notes.push(`${kind}: not run (${why})`);
        continue;
      }
      const mount = await mountFs(kind);
      try {
        const run = runBench([...rest, "--only", "a,b,c,d", "--dir", mount.dir], `${kind}: scenarios (a)-(d) under ${mount.dir}`);
        if (run.status !== 0) {
          failed = true;
          notes.push(`${kind}: the bench reported failures: ${(run.results?.failures ?? ["no results"]).join("; ")}`);
        }
        rows.push(...rowsOf(kind, run.results));
      } finally {
        await mount.unmount();
      }
    }
  } finally {
    await unmountAll();
  }

  console.log("\n######## per filesystem: (a) uncontended p50, (b) contended sections/s, (c) hand-off p50, (d) crash recovery p50");
  console.log("ratios: how many times better exactlock is than the row's other library (time ÷ time, or rate ÷ rate)\n");
  console.log(table(rows, ["filesystem", "scenario", ...LIBS, "vs proper-lockfile", "vs lockfile"]));
  for (const note of notes) console.log(`note: ${note}`);
  return failed ? 1 : 0;
}
