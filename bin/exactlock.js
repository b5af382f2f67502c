#!/usr/bin/env node
"use strict";
require("../dist/cli.js").runProcess(process.argv.slice(2));
