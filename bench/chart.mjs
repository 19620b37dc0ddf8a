// Draws bench/results/chart.svg from bench/results/latest.json (written by bench/run.mjs): the
// contended hand-off scenario, each library with its default settings and with its fast variant,
// side by side: acquisitions per second, and the p99 wait inside acquire() on a log scale.
// Usage: node bench/chart.mjs [results.json] [out.svg]   (npm run bench runs it after run.mjs)
//        node bench/chart.mjs --uncontended [results.json] [out.svg]: scenario 4, the lone caller
//        (pairs per second on 64 keys, and the sequential pair's p50), to
//        bench/results/chart-uncontended.svg (npm run bench draws both)
//        node bench/chart.mjs --scale [scale-latest.json] [out.svg]: the chart of bench/scale.mjs
//        (cost per held lease against leases held, latchkey and redis-semaphore), which
//        scale.mjs also draws itself at its end, to bench/results/scale-chart.svg
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { drawScaleChart } from './lib/scale-chart.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
if (process.argv[2] === '--scale') {
  const input = process.argv[3] ?? path.join(here, 'results', 'scale-latest.json');
  const output = process.argv[4] ?? path.join(here, 'results', 'scale-chart.svg');
  writeFileSync(output, drawScaleChart(JSON.parse(readFileSync(input, 'utf8'))));
  process.stderr.write(`chart written to ${path.relative(process.cwd(), output)}\n`);
  process.exit(0);
}
const uncontended = process.argv[2] === '--uncontended';
const args = uncontended ? process.argv.slice(3) : process.argv.slice(2);
const input = args[0] ?? path.join(here, 'results', 'latest.json');
const output = args[1] ?? path.join(here, 'results', uncontended ? 'chart-uncontended.svg' : 'chart.svg');
const results = JSON.parse(readFileSync(input, 'utf8'));
const scenario = uncontended ? 'uncontended' : 'handoff';
const rows = (results.scenarios?.[scenario]?.rows ?? []).filter((r) => r.metrics);
if (rows.length === 0) throw new Error(`${input}: no ${scenario} results to draw`);

const escape = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const ROW = 22;
const LABEL = 230;
const BAR = 300;
const GAP = 60;
const top = 70;
const height = top + rows.length * ROW + 50;
const width = LABEL + BAR + GAP + LABEL / 4 + BAR + 40;

/** One panel: a bar per row, scaled linearly or on a log scale, with the value at the bar's end. */
function panel(x, title, value, format, log) {
  const values = rows.map((r) => {
    const v = value(r);
    return typeof v === 'number' ? v : NaN; // a figure the run could not measure
  });
  const max = Math.max(...values.filter(Number.isFinite));
  const min = Math.max(0.1, Math.min(...values.filter((v) => v > 0)));
  const scale = (v) => (log ? (Math.log10(Math.max(v, min)) - Math.log10(min) + 0.15) / (Math.log10(max) - Math.log10(min) + 0.15) : v / max);
  const bars = rows.map((r, i) => {
    const v = values[i];
    const w = Number.isFinite(v) ? Math.max(1, scale(v) * BAR) : 0;
    const y = top + i * ROW;
    const fill = r.ours ? '#1f6feb' : '#8c959f';
    const text = Number.isFinite(v) ? format(v) : 'n/a';
    return `<rect x="${x}" y="${y}" width="${w.toFixed(1)}" height="${ROW - 6}" fill="${fill}"/><text x="${(x + w + 4).toFixed(1)}" y="${y + ROW - 10}" font-size="11">${escape(text)}</text>`;
  });
  return `<text x="${x}" y="${top - 14}" font-size="13" font-weight="bold">${escape(title)}</text>${bars.join('')}`;
}

const labels = rows.map((r, i) => `<text x="${LABEL - 8}" y="${top + i * ROW + ROW - 10}" font-size="12" text-anchor="end"${r.ours ? ' font-weight="bold"' : ''}>${escape(r.label)}</text>`);
const meta = results.meta ?? {};
const clients = meta.clients ? ` · ioredis ${meta.clients.ioredis.version}, node-redis ${meta.clients.nodeRedis.version}` : '';
const title = uncontended ? 'The lone caller: acquire + release of a free lock (npm run bench, scenario 4)' : 'Contended hand-off: 8 processes on one key, 1 ms hold (npm run bench)';
const panels = uncontended
  ? [
      panel(LABEL, '64 loops on 64 keys, pairs per second (higher is better)', (r) => r.metrics.pairsPerSec, (v) => Math.round(v).toLocaleString('en-US'), false),
      panel(LABEL + BAR + GAP + LABEL / 4, 'sequential pair p50, ms (lower is better)', (r) => r.metrics.pairP50, (v) => v.toFixed(3), false),
    ]
  : [
      panel(LABEL, 'acquisitions per second (higher is better)', (r) => r.metrics.acqPerSec, (v) => Math.round(v).toLocaleString('en-US'), false),
      panel(LABEL + BAR + GAP + LABEL / 4, 'p99 wait inside acquire(), ms, log scale (lower is better)', (r) => r.metrics.waitP99, (v) => (v >= 100 ? v.toFixed(0) : v.toFixed(1)), true),
    ];
const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="24" font-size="15" font-weight="bold">${escape(title)}</text>
<text x="10" y="42" font-size="11" fill="#57606a">${escape(`${meta.date ?? ''} · node ${meta.node ?? '?'} · redis ${meta.redis ?? '?'} · ${meta.cpus ?? '?'} CPUs${clients} · ${meta.seconds ?? '?'} s per pass · latchkey in blue`)}</text>
${labels.join('\n')}
${panels.join('\n')}
</svg>
`;
writeFileSync(output, svg);
process.stderr.write(`chart written to ${path.relative(process.cwd(), output)}\n`);
