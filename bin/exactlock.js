#!/usr/bin/env node
"use strict";
let cli;
try {
  cli = require("../dist/cli.js");
} catch (error) {
  // Not a status of any command (status's 1 means "held"): exactlock itself could not start.
  const message = error && error.message ? error.message : String(error);
  process.stderr.write(`${message.startsWith("exactlock:") ? message : `exactlock: ${message}`}\n`);
  process.exit(70);
}
cli.runProcess(process.argv.slice(2));
