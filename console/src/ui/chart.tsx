import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { usd } from '../format.ts';

/** An axis figure in dollars, with the digits a small one needs ($0.00015, $0.25, $12). */
const dollars = (v: number) => (v === 0 ? '$0' : v < 1 ? `$${v.toFixed(6).replace(/0+$/, '')}` : `$${v.toFixed(2)}`);

/**
 * Spend per day as bars (uPlot on a canvas), with the same figures as a table beside it for screen readers and
 * for anyone who wants the digits. Days are the API's UTC buckets (`date`, YYYY-MM-DD).
 */
export function DailyChart(props: { days: Array<{ date: string; events: number; cost_micro_usd: number }>; label: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const xs = props.days.map((d) => Date.parse(`${d.date}T00:00:00Z`) / 1000);
    const ys = props.days.map((d) => d.cost_micro_usd / 1_000_000);
    const width = () => Math.max(240, el.clientWidth);
    const plot = new uPlot(
      {
        width: width(),
        height: 220,
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
        legend: { show: false },
        cursor: { show: true, points: { show: false } },
        scales: { x: { time: true, range: (_u, min, max) => [min - 43200, max + 43200] }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
        axes: [
          { stroke: '#44403c', grid: { show: false }, values: (_u, splits) => splits.map((s) => new Date(s * 1000).toISOString().slice(5, 10)) },
          { stroke: '#44403c', size: 84, values: (_u, splits) => splits.map(dollars) },
        ],
        series: [{}, { label: 'spend', fill: '#0f766e', stroke: '#0f766e', paths: uPlot.paths.bars!({ size: [0.7, 48] }), points: { show: false } }],
      },
      [xs, ys],
      el,
    );
    const ro = new ResizeObserver(() => plot.setSize({ width: width(), height: 220 }));
    ro.observe(el);
    el.dataset.drawn = 'true';
    return () => {
      ro.disconnect();
      plot.destroy();
    };
  }, [props.days]);
  return (
    <figure class="chart">
      <div ref={box} class="plot" role="img" aria-label={props.label} data-chart="daily" />
      <figcaption>{props.label}</figcaption>
      <details>
        <summary>The figures</summary>
        <table class="figures" data-table="daily">
          <thead>
            <tr>
              <th scope="col">Day (UTC)</th>
              <th scope="col">Calls</th>
              <th scope="col">Spend</th>
            </tr>
          </thead>
          <tbody>
            {props.days.map((d) => (
              <tr key={d.date} data-date={d.date} data-cost={d.cost_micro_usd}>
                <td>{d.date}</td>
                <td>{d.events}</td>
                <td>{usd(d.cost_micro_usd)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}

/** Spend by a category (model, key) as horizontal bars: a list whose every row says its figure. */
export function BarList(props: { label: string; rows: Array<{ name: string; events: number; cost_micro_usd: number }>; kind: string }) {
  const max = Math.max(1, ...props.rows.map((r) => r.cost_micro_usd));
  return (
    <figure class="chart">
      <figcaption>{props.label}</figcaption>
      {props.rows.length === 0 ? (
        <p class="state empty">No spend in these 14 days.</p>
      ) : (
        <ul class="bars" data-chart={props.kind}>
          {props.rows.map((r) => (
            <li key={r.name} data-name={r.name} data-cost={r.cost_micro_usd}>
              <span class="bar-name">{r.name}</span>
              <span class="bar-track" aria-hidden="true">
                <span class="bar" style={{ width: `${(100 * r.cost_micro_usd) / max}%` }} />
              </span>
              <span class="bar-figure">
                {usd(r.cost_micro_usd)} · {r.events} calls
              </span>
            </li>
          ))}
        </ul>
      )}
    </figure>
  );
}
