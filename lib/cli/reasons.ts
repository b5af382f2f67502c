/** What each stale-verdict reason means, in words (status and gc print these). */

const REASONS: Record<string, string> = {
  free: "nothing holds it",
  owner_alive: "the owner is running; a waiter waits for it, however old the lock is",
  owner_dead: "the owner is gone; the next acquirer reclaims it at once",
  owner_dead_not_reaped: "the owner has exited (not yet reaped); the next acquirer reclaims it at once",
  pid_reused: "the pid now belongs to another process (start time differs); the next acquirer reclaims it",
  liveness_unknown: "the owner's liveness cannot be proven; never reclaimed automatically",
  foreign_host:
    "written on another host (or without a host id where one is expected); never reclaimed from here — see --owner-host-id",
  no_record_host_aware: "no readable owner record; with an owner host id it is never reclaimed",
  malformed_record:
    "the info file is not a valid owner record; never reclaimed — remove the directory by hand once no writer remains",
  legacy_empty_fresh: "an empty lock directory (a legacy holder, or one still publishing), younger than staleMs",
  legacy_empty_aged: "an empty lock directory older than staleMs; the next acquirer reclaims it",
  not_a_lock: "not a lock directory (a symlink, file, FIFO…); never followed or removed",
  transient: "being written or removed right now; look again",
};

/** One sentence for a verdict reason. */
export function explainReason(reason: string): string {
  return REASONS[reason] ?? reason;
}
