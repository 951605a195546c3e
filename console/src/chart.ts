// A live time-series chart on uPlot: a bounded window of points, one
// series per line, redrawn as points arrive.

import uPlot from "uplot";
import { h } from "./dom";

/** Points kept per chart: five minutes at one point a second. */
const WINDOW_POINTS = 300;

const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c"];

export class LiveChart {
  readonly el: HTMLElement;
  private readonly plot: uPlot;
  private readonly data: (number | null)[][];
  private readonly resize: ResizeObserver;

  /** `top` is the least the y axis reaches, so that an idle chart still has a scale. */
  constructor(title: string, series: string[], format: (value: number) => string, id: string, top = 1) {
    const box = h("div", { class: "chart-box" });
    this.el = h("figure", { class: "chart", id, "data-points": 0 }, h("figcaption", {}, title), box);
    this.data = [[], ...series.map(() => [])];
    const opts: uPlot.Options = {
      width: 400,
      height: 180,
      series: [
        {},
        ...series.map((label, i) => ({
          label,
          stroke: COLORS[i % COLORS.length],
          width: 2,
          value: (_: uPlot, v: number | null) => (v === null ? "–" : format(v)),
        })),
      ],
      axes: [{}, { values: (_: uPlot, ticks: number[]) => ticks.map(format), size: 70 }],
      // At least the last minute on the time axis, so that the first points
      // do not spread over a span of years.
      scales: { x: { time: true, range: (_: uPlot, min: number, max: number) => [Math.min(min, max - 60), max] }, y: { range: (_: uPlot, min: number, max: number) => [Math.min(0, min), Math.max(top, max * 1.1)] } },
      legend: { live: false },
      cursor: { drag: { x: false, y: false } },
    };
    this.plot = new uPlot(opts, this.data as uPlot.AlignedData, box);
    // Follows the width of its column, at 1280 px and on a narrow window alike.
    this.resize = new ResizeObserver(() => {
      const width = Math.max(200, box.clientWidth);
      if (width !== this.plot.width) this.plot.setSize({ width, height: 180 });
    });
    this.resize.observe(box);
  }

  /** Adds one point at `time` (seconds since the epoch), one value per series. */
  push(time: number, values: (number | null)[]): void {
    this.data[0].push(time);
    values.forEach((v, i) => this.data[i + 1].push(v));
    if (this.data[0].length > WINDOW_POINTS) for (const column of this.data) column.shift();
    this.plot.setData(this.data as uPlot.AlignedData);
    this.el.dataset.points = String(this.data[0].length);
  }

  destroy(): void {
    this.resize.disconnect();
    this.plot.destroy();
  }
}
