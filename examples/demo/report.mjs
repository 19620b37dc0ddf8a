// Part of examples/demo.mjs (the README's quick-start demo): the checks at the end of a run
// (verdict) and the progress line printed once a second (class Progress).

/** Prints one line per check and PASS or FAIL; returns the exit code. */
export function verdict({ finished, progress, counter, fences, resource }) {
  const checks = [];
  const check = (ok, text) => checks.push({ ok, text });
  for (const { id, error } of finished) {
    if (error !== undefined) check(false, `worker ${id} failed: ${error}`);
  }
  const total = finished.reduce((sum, r) => sum + (r.count ?? progress.counts[r.id]), 0);
  const per = finished.map((r) => r.count ?? progress.counts[r.id]).join(' + ');
  check(total > 0, `${total} acquisition${total === 1 ? '' : 's'} in all (${per})`);
  check(counter === total, `counter ${counter} ${counter === total ? '==' : '!='} ${total} acquisitions${counter === total ? '' : ` (${total - counter} updates lost)`}`);
  const backwards = fences.findIndex((f, i) => i > 0 && !(f > fences[i - 1]));
  if (fences.length !== total) {
    check(false, `${fences.length} fences recorded for ${total} acquisitions`);
  } else if (backwards !== -1) {
    check(false, `fences not strictly increasing: #${backwards} is ${fences[backwards]} after ${fences[backwards - 1]}`);
  } else {
    check(total > 0, `${fences.length} fences strictly increasing in acquisition order (${fences[0]} .. ${fences.at(-1)})`);
  }
  const expected = { value: String(counter), fence: fences.at(-1) };
  const resourceOk = total === 0 || (resource?.value === expected.value && resource?.fence === expected.fence);
  check(
    resourceOk,
    resource
      ? `fenced resource holds ${resource.value} at fence ${resource.fence}${resourceOk ? '' : ` (expected ${expected.value} at ${expected.fence})`}`
      : 'fenced resource was never written',
  );

  console.log('verdict:');
  for (const { ok, text } of checks) console.log(`  ${ok ? 'ok  ' : 'FAIL'} ${text}`);
  const passed = checks.every((c) => c.ok);
  console.log(passed ? 'PASS' : 'FAIL');
  return passed ? 0 : 1;
}

/** Acquisitions per worker and the last fence, printed once a second. */
export class Progress {
  constructor(workers) {
    this.counts = new Array(workers).fill(0);
    this.lastFence = undefined;
    this.started = 0;
    this.timer = undefined;
  }
  acquired(id, fence) {
    this.counts[id]++;
    this.lastFence = fence;
  }
  start() {
    this.started = Date.now();
    this.timer = setInterval(() => this.print(), 1000);
  }
  stop() {
    clearInterval(this.timer);
  }
  print() {
    const elapsed = Math.round((Date.now() - this.started) / 1000);
    const per = this.counts.map((n, i) => `w${i} ${String(n).padStart(4)}`).join('  ');
    const total = this.counts.reduce((a, b) => a + b, 0);
    console.log(`  ${String(elapsed).padStart(3)}s  ${per}  total ${String(total).padStart(5)}  last fence ${this.lastFence ?? '-'}`);
  }
}
