// Hand-written SVG bar chart of the chart groups (no dependencies).
const WIDTH = 1000
const LABEL_X = 300 // labels end here (right-aligned)
const BAR_X = 310
const BAR_MAX = 340
const ROW = 22
const BAR_H = 14
const COLORS = { base: '#9aa5b1', other: '#5fa8a0', ours: '#2f6fdf' }
/** white outline behind value labels, so a target line under them stays readable */
const HALO = 'stroke="#fff" stroke-width="3" paint-order="stroke"'

const esc = s => String(s).replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;')
const text = (x, y, s, attrs = '') => `<text x="${x}" y="${y}"${attrs ? ' ' + attrs : ''}>${esc(s)}</text>`

function group (g, top) {
  const out = []
  let y = top + 18
  out.push(text(12, y, g.title, 'font-size="16" font-weight="700"'))
  y += 17
  out.push(text(24, y, g.subtitle, 'fill="#555"'))
  for (const t of g.targets) {
    y += 18
    const mark = t.met ? '✔ met' : '✘ missed'
    out.push(text(24, y, `${mark}: ${t.target} — measured ${t.measured}`, `fill="${t.met ? '#1b7f3b' : '#b3261e'}" font-weight="600"`))
  }
  y += 10
  const max = Math.max(...g.rows.map(r => r.value ?? 0), g.targetLine ?? 0) || 1
  const scale = v => Math.max(1, ((v ?? 0) / max) * BAR_MAX)
  if (g.targetLine !== undefined) {
    const tx = (BAR_X + scale(g.targetLine)).toFixed(1)
    const bottom = y + g.rows.length * ROW
    out.push(`<line x1="${tx}" x2="${tx}" y1="${y - 4}" y2="${bottom - 4}" stroke="#b3261e" stroke-dasharray="4 3"/>`)
    out.push(text(tx, bottom + 8, g.targetLineLabel, 'text-anchor="middle" fill="#b3261e" font-size="11"'))
  }
  for (const r of g.rows) {
    const w = scale(r.value)
    out.push(text(LABEL_X, y + BAR_H - 2, r.label, 'text-anchor="end"'))
    out.push(`<rect x="${BAR_X}" y="${y}" width="${w.toFixed(1)}" height="${BAR_H}" rx="2" fill="${COLORS[r.kind]}"/>`)
    out.push(text(BAR_X + w + 6, y + BAR_H - 2, r.text, `${HALO}${r.kind === 'ours' ? ' font-weight="600"' : ''}`))
    y += ROW
  }
  return { svg: out.join('\n'), bottom: y + (g.targetLine === undefined ? 14 : 26) }
}

export function svg (groups, heading) {
  const parts = []
  let y = 36
  for (const g of groups) {
    const { svg: s, bottom } = group(g, y)
    parts.push(s)
    y = bottom
  }
  const legend = Object.entries({ base: 'baseline', other: 'other', ours: 'WriteBuffer / cache' })
    .map(([k, label], i) => `<rect x="${12 + i * 170}" y="${y}" width="12" height="12" fill="${COLORS[k]}"/>${text(30 + i * 170, y + 11, label)}`)
  const height = y + 30
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">`,
    '<rect width="100%" height="100%" fill="#fff"/>',
    text(12, 22, heading, 'font-size="14" fill="#333"'),
    ...parts,
    ...legend,
    '</svg>',
    '',
  ].join('\n')
}
