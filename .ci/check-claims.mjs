#!/usr/bin/env node
// Every configuration variable in the README's table and every error message the README documents
// must be mentioned by at least one test file (libs/*/test, services/*/test: tests and their
// helpers), so a documented claim cannot lose its test unnoticed. Prints what is missing and exits 1.
// A variable that cannot be exercised on this machine goes in UNTESTABLE with its reason.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(fileURLToPath(import.meta.url), '..', '..');

// Variables whose behaviour needs a service this machine (and CI) does not run. Each needs a reason.
const UNTESTABLE = new Map([
  ['QDRANT_API_KEY', 'only sent to a Qdrant server, which CI does not run (the vector store contract runs on the embedded store)'],
  ['NO_COLOR', 'a terminal-only colour switch: tests capture logs through pipes, where the pretty format is never coloured'],
]);

function readme() {
  return readFileSync(join(root, 'README.md'), 'utf8');
}

/** Rows of the markdown table whose header row starts with `| <firstHeader> |`. */
function tableRows(text, firstHeader) {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.startsWith(`| ${firstHeader} |`));
  if (start < 0) throw new Error(`README.md has no table headed "${firstHeader}"`);
  const rows = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(line.split(/(?<!\\)\|/).slice(1, -1).map((c) => c.trim()));
  }
  return rows;
}

const backticked = (cell) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);

export function documentedVariables(text) {
  const names = new Set();
  for (const [first] of tableRows(text, 'Variable')) {
    for (const name of backticked(first)) if (/^[A-Z][A-Z0-9_]+$/.test(name)) names.add(name);
  }
  return [...names];
}

/**
 * Error messages: the Message column of the JSON-RPC error table (rows whose first cell is a code).
 * Placeholders (`<field>`, `…`) split a message into fragments; a test must contain every fragment.
 */
export function documentedMessages(text) {
  const messages = new Map();
  for (const row of tableRows(text, 'Code')) {
    if (!/^-?\d+$/.test(row[0]) || row.length < 3) continue;
    for (const message of backticked(row[2])) {
      const fragments = message
        .split(/<[^>]+>|…/)
        .map((f) => f.trim())
        .filter((f) => f.length >= 4);
      if (fragments.length > 0) messages.set(message, fragments);
    }
  }
  return messages;
}

function testFiles() {
  const files = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir)) {
      if (entry === 'node_modules' || entry === 'dist') continue;
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.(ts|js|mjs)$/.test(entry)) files.push(path);
    }
  };
  for (const group of ['libs', 'services']) {
    for (const pkg of readdirSync(join(root, group))) {
      const dir = join(root, group, pkg, 'test');
      try {
        if (statSync(dir).isDirectory()) walk(dir);
      } catch {
        // a package without tests
      }
    }
  }
  return files;
}

function main() {
  const text = readme();
  const files = testFiles();
  const corpus = files.map((f) => readFileSync(f, 'utf8')).join('\n');
  const mentions = (name) => new RegExp(`\\b${name}\\b`).test(corpus);

  const variables = documentedVariables(text);
  const missingVariables = variables.filter((v) => !UNTESTABLE.has(v) && !mentions(v));
  const staleAllowances = [...UNTESTABLE.keys()].filter((v) => !variables.includes(v));

  const messages = documentedMessages(text);
  const missingMessages = [...messages].filter(([, fragments]) => !fragments.every((f) => corpus.includes(f)));

  console.log(
    `check-claims: ${variables.length} README variables (${UNTESTABLE.size} allowed untested), ` +
      `${messages.size} README error messages, ${files.length} test files`,
  );
  for (const v of missingVariables) console.log(`  MISSING variable with no test mentioning it: ${v}`);
  for (const [m] of missingMessages) console.log(`  MISSING error message with no test asserting it: ${m}`);
  for (const v of staleAllowances) console.log(`  STALE allow-list entry (not in the README table): ${v}`);
  const failures = missingVariables.length + missingMessages.length + staleAllowances.length;
  if (failures > 0) {
    console.log(
      `check-claims: ${failures} problem(s). Add a test under libs/*/test or services/*/test that exercises each ` +
        `(or, for a variable that needs infrastructure CI lacks, an entry with its reason in UNTESTABLE in ${relative(root, fileURLToPath(import.meta.url))}).`,
    );
    process.exit(1);
  }
  console.log('check-claims: every README variable and error message has a test');
}

main();
