/** Minimal inline-SVG line charts for the self-contained HTML report. */

export interface Series {
  name: string;
  /** A point whose x or y is not finite breaks the line (a gap), and is not drawn. */
  points: Array<[number, number]>;
  color?: string;
  /** Draw as a step function (CDFs). */
  step?: boolean;
  dashed?: boolean;
}

export interface ChartOptions {
  title: string;
  /** A second line under the title: what a point is (an instant, or an average over a bucket). */
  subtitle?: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  width?: number;
  height?: number;
  xLog?: boolean;
  yMin?: number;
  yMax?: number;
  /** Vertical markers (phase boundaries). */
  marks?: Array<{ x: number; label: string }>;
  formatX?: (v: number) => string;
  formatY?: (v: number) => string;
}

/** Width of one character of a 10 px mark label, a generous average for the sans-serif fonts reports are read in. */
export const MARK_CHAR_WIDTH = 6;

const PALETTE = ["#d9480f", "#1c7ed6", "#2b8a3e", "#862e9c", "#e67700", "#0b7285"];

function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string);
}

/**
 * The top of an axis that shows every value up to `max`: the first nice tick
 * at or above it, so nothing is drawn above the highest labelled tick (a
 * dashed wave at 444/s under a last label of 400/s reads as 400).
 */
export function niceCeiling(min: number, max: number, count = 5): number {
  let top = max;
  // A wider span can choose a coarser step; a few rounds settle it.
  for (let i = 0; i < 5; i++) {
    const ticks = niceTicks(min, top, count);
    const last = ticks[ticks.length - 1];
    if (last === undefined || ticks.length < 2 || last >= max) return Math.max(top, last ?? top);
    top = last + (last - (ticks[ticks.length - 2] as number));
  }
  return top;
}

/** "Nice" tick values covering [min, max]. */
export function niceTicks(min: number, max: number, count = 5): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  if (max === min) return [min];
  const span = max - min;
  const rough = span / count;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => span / s <= count) ?? 10 * magnitude;
  const ticks: number[] = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step) ticks.push(Number(v.toPrecision(12)));
  return ticks;
}

function logTicks(min: number, max: number): number[] {
  const ticks: number[] = [];
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v >= min && v <= max) ticks.push(v);
    }
  }
  return ticks;
}

function shortNumber(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toFixed(1)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toFixed(1)}k`;
  return `${+v.toFixed(2)}`;
}

export function lineChart(options: ChartOptions): string {
  const width = options.width ?? 760;
  const height = options.height ?? 300;
  const margin = { top: options.subtitle ? 48 : 34, right: 16, bottom: 44, left: 64 };
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const all = options.series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  const header = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${escapeXml(options.title)}">`;
  const subtitle = options.subtitle ? `<text x="${margin.left}" y="36" font-size="11" fill="#495057">${escapeXml(options.subtitle)}</text>` : "";
  const title = `<text x="${margin.left}" y="20" font-size="14" font-weight="600">${escapeXml(options.title)}</text>${subtitle}`;
  if (all.length === 0) {
    return `${header}${title}<text x="${width / 2}" y="${height / 2}" text-anchor="middle" fill="#868e96">no data</text></svg>`;
  }
  const xLog = options.xLog === true;
  const xsRaw = all.map(([x]) => x);
  let xMin = Math.min(...xsRaw);
  let xMax = Math.max(...xsRaw);
  if (xLog) {
    xMin = Math.max(1, xMin);
    xMax = Math.max(xMin * 10, xMax);
  }
  if (xMax === xMin) xMax = xMin + 1;
  const ys = all.map(([, y]) => y);
  const yMin = options.yMin ?? Math.min(0, ...ys);
  let yMax = options.yMax ?? Math.max(...ys);
  if (yMax === yMin) yMax = yMin + 1;
  if (options.yMax === undefined) yMax = niceCeiling(yMin, yMax);
  const fx = (x: number): number =>
    margin.left + (xLog ? (Math.log10(Math.max(x, xMin)) - Math.log10(xMin)) / (Math.log10(xMax) - Math.log10(xMin)) : (x - xMin) / (xMax - xMin)) * plotW;
  const fy = (y: number): number => margin.top + plotH - ((y - yMin) / (yMax - yMin)) * plotH;
  const formatX = options.formatX ?? shortNumber;
  const formatY = options.formatY ?? shortNumber;

  const parts: string[] = [header, title];
  parts.push(`<rect x="${margin.left}" y="${margin.top}" width="${plotW}" height="${plotH}" fill="#fff" stroke="#dee2e6"/>`);
  for (const t of niceTicks(yMin, yMax)) {
    const y = fy(t).toFixed(1);
    parts.push(`<line x1="${margin.left}" x2="${margin.left + plotW}" y1="${y}" y2="${y}" stroke="#f1f3f5"/>`);
    parts.push(`<text x="${margin.left - 6}" y="${y}" font-size="11" text-anchor="end" dominant-baseline="middle" fill="#495057">${escapeXml(formatY(t))}</text>`);
  }
  for (const t of xLog ? logTicks(xMin, xMax) : niceTicks(xMin, xMax, 8)) {
    const x = fx(t).toFixed(1);
    parts.push(`<line x1="${x}" x2="${x}" y1="${margin.top}" y2="${margin.top + plotH}" stroke="#f1f3f5"/>`);
    parts.push(`<text x="${x}" y="${margin.top + plotH + 16}" font-size="11" text-anchor="middle" fill="#495057">${escapeXml(formatX(t))}</text>`);
  }
  let lastLabelX = Number.NEGATIVE_INFINITY;
  let row = 0;
  for (const mark of options.marks ?? []) {
    if (mark.x < xMin || mark.x > xMax) continue;
    const px = fx(mark.x);
    // Labels of close marks go on successive rows instead of on top of each other.
    row = px - lastLabelX < 70 ? (row + 1) % 4 : 0;
    lastLabelX = px;
    const x = px.toFixed(1);
    parts.push(`<line x1="${x}" x2="${x}" y1="${margin.top}" y2="${margin.top + plotH}" stroke="#adb5bd" stroke-dasharray="3 3"/>`);
    // A label that would run past the plot's right edge ends at its line instead of starting there.
    const fits = px + 3 + mark.label.length * MARK_CHAR_WIDTH <= margin.left + plotW;
    const anchor = fits ? "" : ' text-anchor="end"';
    parts.push(`<text x="${(fits ? px + 3 : px - 3).toFixed(1)}" y="${margin.top + 10 + row * 11}" font-size="10" fill="#868e96"${anchor}>${escapeXml(mark.label)}</text>`);
  }
  let legendX = margin.left + 8;
  options.series.forEach((series, i) => {
    const color = series.color ?? PALETTE[i % PALETTE.length];
    if (!series.points.some(([x, y]) => Number.isFinite(x) && Number.isFinite(y))) return;
    let d = "";
    let open = false;
    for (const [x, y] of series.points) {
      if (!Number.isFinite(x) || !Number.isFinite(y)) {
        open = false;
        continue;
      }
      const px = fx(x).toFixed(1);
      const py = fy(y).toFixed(1);
      if (!open) d += `M${px},${py}`;
      else if (series.step) d += `H${px}V${py}`;
      else d += `L${px},${py}`;
      open = true;
    }
    parts.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="1.8"${series.dashed ? ' stroke-dasharray="5 3"' : ""}/>`);
    // Legend entries sit side by side, each as wide as its name (about 6.5 px per character at 11 px).
    const lx = legendX;
    legendX += Math.max(80, series.name.length * 6.5 + 30);
    parts.push(`<rect x="${lx}" y="${margin.top + plotH + 26}" width="10" height="10" fill="${color}"/>`);
    parts.push(`<text x="${lx + 14}" y="${margin.top + plotH + 35}" font-size="11">${escapeXml(series.name)}</text>`);
  });
  parts.push(`<text x="${margin.left + plotW}" y="${height - 4}" font-size="11" text-anchor="end" fill="#495057">${escapeXml(options.xLabel)}</text>`);
  parts.push(`<text x="12" y="${margin.top + plotH / 2}" font-size="11" fill="#495057" transform="rotate(-90 12 ${margin.top + plotH / 2})" text-anchor="middle">${escapeXml(options.yLabel)}</text>`);
  parts.push("</svg>");
  return parts.join("");
}
