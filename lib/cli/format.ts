/** Small formatting helpers shared by the commands. */

/** A duration in milliseconds for people: `850 ms`, `3.2 s`, `4 min 05 s`, `2 h 03 min`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return "unknown";
  if (ms < 0) return `${formatDuration(-ms)} in the future`;
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  const seconds = Math.floor(ms / 1_000);
  if (seconds < 3_600) return `${Math.floor(seconds / 60)} min ${String(seconds % 60).padStart(2, "0")} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 48 * 60) return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min`;
  return `${Math.floor(minutes / 1_440)} d ${Math.floor((minutes % 1_440) / 60)} h`;
}

/** A latency in milliseconds with sensible precision: `0.42 ms`, `12.3 ms`, `1.5 s`. */
export function formatLatency(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return "n/a";
  if (ms < 10) return `${ms.toFixed(2)} ms`;
  if (ms < 1_000) return `${ms.toFixed(1)} ms`;
  return `${(ms / 1_000).toFixed(2)} s`;
}

/** The q-quantile (0..1) of `values` by the nearest-rank method, or `null` when empty. */
export function quantile(values: readonly number[], q: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1]!;
}

/** Writes one JSON document to stdout. */
export function printJson(value: unknown): void {
  // A bigint (a fencing token) as its decimal string: JSON has no integers that large.
  const text = JSON.stringify(value, (_key, item: unknown) => (typeof item === "bigint" ? item.toString() : item), 2);
  process.stdout.write(`${text}\n`);
}

/** Aligned `label  value` lines, indented. */
export function table(rows: ReadonlyArray<readonly [string, string]>, indent = "  "): string {
  const width = Math.max(...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => `${indent}${label.padEnd(width)}  ${value}`).join("\n");
}
