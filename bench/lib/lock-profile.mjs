// Where a process's CPU goes in given windows of time: the samples of its V8 CPU profile (node
// --cpu-prof) that fall in them, by function, self and inclusive. bench/trace-handoff.mjs uses it
// with TRACE_PROFILE for the lock phase of each hand-off (the next holder's 'message' event to
// its acquire() resolving). The profile's sample times and process.hrtime() read the same
// monotonic clock, so the windows are written in µs of that clock.
import fs from 'node:fs';
import path from 'node:path';

/** The file a worker writes its windows to: `[[fromUs, toUs], ...]`. */
export function windowsFile(dir, kind, pid) {
  return path.join(dir, `windows-${kind}-${pid}.json`);
}

/** A function's name as the tables print it: name, file (shortened) and line. */
export function frameName({ callFrame: f }) {
  const file = f.url.replace(/.*\/(node_modules\/[^/]+|dist|bench)\//, '$1/').replace(/^node:internal\//, '');
  return `${f.functionName || '(anonymous)'} ${file}${f.lineNumber >= 0 ? `:${f.lineNumber + 1}` : ''}`;
}

/** A profile's nodes by id, and each node's parent's id. */
export function profileTree(profile) {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
  return { nodes, parent };
}

/**
 * The samples of every worker of `kind` profiled in `dir` that fall in its windows: how many, and
 * per function how many had it on top (self) and anywhere on the stack (inclusive).
 */
export function profileWindows(dir, kind) {
  const files = fs.readdirSync(dir);
  const self = new Map();
  const inclusive = new Map();
  let samples = 0;
  let windowCount = 0;
  const add = (map, key) => map.set(key, (map.get(key) ?? 0) + 1);
  for (const file of files.filter((f) => f.startsWith(`windows-${kind}-`))) {
    const pid = file.slice(`windows-${kind}-`.length, -'.json'.length);
    const profileFile = files.find((f) => f.endsWith('.cpuprofile') && f.includes(`.${pid}.`));
    if (!profileFile) continue;
    const profile = JSON.parse(fs.readFileSync(path.join(dir, profileFile), 'utf8'));
    const windows = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')).sort((a, b) => a[0] - b[0]);
    windowCount += windows.length;
    const { nodes, parent } = profileTree(profile);
    let t = profile.startTime;
    let w = 0;
    for (let i = 0; i < profile.samples.length && w < windows.length; i++) {
      t += profile.timeDeltas[i];
      while (w < windows.length && windows[w][1] < t) w++;
      if (w === windows.length || t < windows[w][0]) continue;
      const top = nodes.get(profile.samples[i]);
      samples++;
      add(self, frameName(top));
      const seen = new Set();
      for (let id = top.id; id !== undefined; id = parent.get(id)) {
        const name = frameName(nodes.get(id));
        if (!seen.has(name)) add(inclusive, name);
        seen.add(name);
      }
    }
  }
  return { samples, windows: windowCount, self, inclusive };
}

/**
 * Prints a markdown table of {@link profileWindows}'s result, shares of the samples: the `top`
 * functions by self time, then latchkey's own (its dist) by inclusive time, and the samples per
 * window against `baseline`'s (another row of the same run), which compares CPU per lock phase.
 */
export function printProfile(label, result, baseline, top = 12) {
  const { samples, windows, self, inclusive } = result;
  const share = (n) => `${((100 * n) / Math.max(1, samples)).toFixed(1)} %`;
  const perWindow = samples / Math.max(1, windows);
  const against = baseline ? `, ${(perWindow / (baseline.samples / Math.max(1, baseline.windows))).toFixed(2)}× the first row's samples per window` : '';
  console.log(`\n${label}: ${samples} samples in ${windows} windows${against}\n\n| function | self | inclusive |\n| --- | --: | --: |`);
  const bySelf = [...self].filter(([name]) => !/^\((root|program|idle)\)/.test(name)).sort((a, b) => b[1] - a[1]).slice(0, top);
  const own = [...inclusive].filter(([name]) => / dist\//.test(name) && !bySelf.some(([n]) => n === name)).sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [name] of [...bySelf, ...own]) console.log(`| ${name} | ${share(self.get(name) ?? 0)} | ${share(inclusive.get(name) ?? 0)} |`);
}
