#!/usr/bin/env node
"use strict";
require("../dist/cli.js")
  .main(process.argv.slice(2))
  .then((status) => {
    process.exitCode = status;
  });
