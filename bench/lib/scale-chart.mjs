// The chart of bench/scale.mjs's held leases: cost per lease against the number of leases held,
// latchkey next to redis-semaphore and the floor (the smallest checked renewal), four panels on log-log scales: Redis CPU and Node CPU (µs of
// CPU per second, per lease), Redis commands per second per lease (the commands scripts run
// included), and script calls (round trips) per second per lease. An SVG string, drawn like
// bench/chart.mjs's (no dependencies).

const escape = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const COLORS = { latchkey: '#1f6feb', 'redis-semaphore': '#8c959f', floor: '#2da44e' };
const LABELS = { latchkey: 'latchkey (renew: true)', 'redis-semaphore': 'redis-semaphore Mutex (auto-refresh)', floor: 'floor: smallest checked renewal' };
const PANEL = { width: 220, height: 210 };
const MARGIN = { left: 58, top: 78, gap: 48, bottom: 62 };

const PANELS = [
  { title: 'Redis CPU per lease, µs/s', value: (r) => (r.redisCpuPercent * 1e4) / r.n },
  { title: 'Node CPU per lease, µs/s', value: (r) => (r.nodeCpuPercent * 1e4) / r.n },
  { title: 'Redis commands/s per lease', value: (r) => r.commandsPerSecond / r.n },
  { title: 'script calls/s per lease', value: (r) => r.scriptCallsPerSecond / r.n },
];

const log10 = Math.log10;
const label = (v) => (v >= 1000 ? `${(v / 1000).toLocaleString('en-US')}k` : v >= 1 ? String(Math.round(v * 100) / 100) : v.toPrecision(1));

function panel(x0, spec, rows, sizes) {
  const { width, height } = PANEL;
  const y0 = MARGIN.top;
  const points = rows.map((r) => ({ lib: r.lib, n: r.n, v: spec.value(r) })).filter((p) => Number.isFinite(p.v) && p.v > 0);
  const [nMin, nMax] = [Math.min(...sizes), Math.max(...sizes)];
  const vs = points.map((p) => p.v);
  const vMin = 10 ** Math.floor(log10(Math.min(...vs, 1)));
  const vMax = 10 ** Math.ceil(log10(Math.max(...vs, vMin * 10)));
  const sx = (n) => x0 + (nMax === nMin ? width / 2 : ((log10(n) - log10(nMin)) / (log10(nMax) - log10(nMin))) * width);
  const sy = (v) => y0 + height - ((log10(v) - log10(vMin)) / (log10(vMax) - log10(vMin))) * height;
  const parts = [`<text x="${x0}" y="${y0 - 12}" font-size="13" font-weight="bold">${escape(spec.title)}</text>`];
  parts.push(`<rect x="${x0}" y="${y0}" width="${width}" height="${height}" fill="none" stroke="#d0d7de"/>`);
  for (let e = log10(vMin); e <= log10(vMax); e++) {
    const y = sy(10 ** e);
    parts.push(`<line x1="${x0}" x2="${x0 + width}" y1="${y}" y2="${y}" stroke="#eaeef2"/><text x="${x0 - 6}" y="${y + 4}" font-size="10" text-anchor="end">${escape(label(10 ** e))}</text>`);
  }
  for (const n of sizes) {
    parts.push(`<text x="${sx(n)}" y="${y0 + height + 14}" font-size="10" text-anchor="middle">${escape(n >= 1000 ? `${n / 1000}k` : n)}</text>`);
  }
  parts.push(`<text x="${x0 + width / 2}" y="${y0 + height + 30}" font-size="11" text-anchor="middle" fill="#57606a">leases held (log)</text>`);
  for (const lib of Object.keys(COLORS)) {
    const mine = points.filter((p) => p.lib === lib).sort((a, b) => a.n - b.n);
    if (mine.length === 0) continue;
    parts.push(`<polyline fill="none" stroke="${COLORS[lib]}" stroke-width="2" points="${mine.map((p) => `${sx(p.n).toFixed(1)},${sy(p.v).toFixed(1)}`).join(' ')}"/>`);
    for (const p of mine) parts.push(`<circle cx="${sx(p.n).toFixed(1)}" cy="${sy(p.v).toFixed(1)}" r="3" fill="${COLORS[lib]}"/>`);
  }
  return parts.join('\n');
}

/** The SVG of `results` (bench/results/scale-latest.json's content). */
export function drawScaleChart(results) {
  const rows = (results.held ?? []).filter((r) => !r.error);
  if (rows.length === 0) throw new Error('no held-lease results to draw');
  const sizes = [...new Set(rows.map((r) => r.n))].sort((a, b) => a - b);
  const width = MARGIN.left + PANELS.length * (PANEL.width + MARGIN.gap) + 10;
  const height = MARGIN.top + PANEL.height + MARGIN.bottom;
  const meta = results.meta ?? {};
  const clients = meta.clients ? ` · ioredis ${meta.clients.ioredis.version}` : '';
  const legend = Object.entries(COLORS)
    .map(([lib, color], i) => `<rect x="${MARGIN.left + i * 170}" y="${height - 18}" width="14" height="4" fill="${color}"/><text x="${MARGIN.left + i * 170 + 20}" y="${height - 12}" font-size="11">${escape(LABELS[lib])}</text>`)
    .join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="24" font-size="15" font-weight="bold">Held leases, renewed (TTL 10 s): cost per lease against leases held (node bench/scale.mjs, lower is better)</text>
<text x="10" y="42" font-size="11" fill="#57606a">${escape(`${meta.date ?? ''} · node ${meta.node ?? '?'} · redis ${meta.redis ?? '?'} · ${meta.cpus ?? '?'} CPUs${clients} · ${meta.seconds ?? '?'} s window per size · CPU in µs per second per lease (1 % of a core = 10,000 µs/s)`)}</text>
${PANELS.map((spec, i) => panel(MARGIN.left + i * (PANEL.width + MARGIN.gap), spec, rows, sizes)).join('\n')}
${legend}
</svg>
`;
}
