// The overview: `GET /api/v1/overview/stream` sends a snapshot a second;
// rates are the differences of successive counters over their times.

import { stream } from "../api";
import { LiveChart } from "../chart";
import { bytes, fill, h, num } from "../dom";
import type { Stop } from "../main";

interface Overview {
  time: string;
  connections: number;
  sessions_online: number;
  sessions_offline: number;
  subscriptions: number;
  retained: number;
  messages_in: number;
  messages_out: number;
  bytes_in: number;
  bytes_out: number;
  dropped: number;
  queued_messages: number;
  queued_bytes: number;
  latency: { p50: number | null; p90: number | null; p99: number | null } | null;
  disk_free_bytes: number | null;
  log_bytes: number | null;
}

const rate = (v: number) => (v >= 100 ? v.toFixed(0) : v.toFixed(1));
// Axis ticks between whole numbers keep their fraction; counts themselves are whole.
const count = (v: number) => (Number.isInteger(v) ? num(v) : v.toFixed(1));
const orDash = (v: number | null) => (v === null ? "–" : seconds(v));
const seconds = (v: number) => (v < 0.001 ? `${(v * 1e6).toFixed(0)} µs` : v < 1 ? `${(v * 1e3).toFixed(1)} ms` : `${v.toFixed(2)} s`);

export function overviewPage(main: HTMLElement): Stop {
  const tiles: Record<string, HTMLElement> = {};
  const tile = (key: string, label: string) => {
    tiles[key] = h("dd", { id: `stat-${key}` }, "–");
    return h("div", { class: "tile" }, h("dt", {}, label), tiles[key]);
  };
  const state = h("p", { class: "status", role: "status" }, "Connecting to the live stream…");
  const stats = h(
    "dl",
    { class: "tiles" },
    tile("connections", "Connections"),
    tile("sessions", "Sessions online / offline"),
    tile("subscriptions", "Subscriptions"),
    tile("retained", "Retained messages"),
    tile("rate_in", "Messages in /s"),
    tile("rate_out", "Messages out /s"),
    tile("latency", "Latency p50 / p99"),
    tile("dropped", "Dropped"),
    tile("queued", "Queued (offline sessions)"),
    tile("disk", "Disk free"),
    tile("log", "Durable log"),
  );
  const messages = new LiveChart("Messages per second", ["in", "out"], rate, "chart-messages");
  const connections = new LiveChart("Connections", ["connections"], count, "chart-connections");
  const latency = new LiveChart("Publish-to-deliver latency", ["p50", "p90", "p99"], seconds, "chart-latency", 0.001);
  const queues = new LiveChart("Queued messages", ["queued"], count, "chart-queued");
  const disk = new LiveChart("Disk free", ["free"], bytes, "chart-disk");
  const latencyNote = h("p", { class: "note", hidden: true }, "Nothing was delivered in the last second.");
  const charts = h("div", { class: "charts" }, messages.el, connections.el, h("div", {}, latency.el, latencyNote), queues.el, disk.el);
  main.append(state, stats, charts);

  let previous: Overview | null = null;
  const stopStream = stream(
    "/api/v1/overview/stream",
    {
      overview: (data) => {
        const now = data as Overview;
        const time = Date.parse(now.time) / 1000 || Date.now() / 1000;
        let rateIn: number | null = null;
        let rateOut: number | null = null;
        if (previous) {
          const dt = time - (Date.parse(previous.time) / 1000 || time - 1);
          // A counter that went down means Ferry restarted: no rate for that second.
          if (dt > 0 && now.messages_in >= previous.messages_in && now.messages_out >= previous.messages_out) {
            rateIn = (now.messages_in - previous.messages_in) / dt;
            rateOut = (now.messages_out - previous.messages_out) / dt;
          }
        }
        previous = now;
        fill(tiles.connections, num(now.connections));
        fill(tiles.sessions, `${num(now.sessions_online)} / ${num(now.sessions_offline)}`);
        fill(tiles.subscriptions, num(now.subscriptions));
        fill(tiles.retained, num(now.retained));
        fill(tiles.rate_in, rateIn === null ? "–" : rate(rateIn));
        fill(tiles.rate_out, rateOut === null ? "–" : rate(rateOut));
        fill(tiles.dropped, num(now.dropped));
        fill(tiles.queued, `${num(now.queued_messages)} (${bytes(now.queued_bytes)})`);
        fill(tiles.disk, bytes(now.disk_free_bytes));
        fill(tiles.log, bytes(now.log_bytes));
        messages.push(time, [rateIn, rateOut]);
        connections.push(time, [now.connections]);
        const l = now.latency;
        const hasLatency = !!l && (l.p50 !== null || l.p90 !== null || l.p99 !== null);
        latencyNote.hidden = hasLatency;
        fill(tiles.latency, hasLatency && l ? `${orDash(l.p50)} / ${orDash(l.p99)}` : "–");
        latency.push(time, [l?.p50 ?? null, l?.p90 ?? null, l?.p99 ?? null]);
        queues.push(time, [now.queued_messages]);
        disk.push(time, [now.disk_free_bytes]);
        state.textContent = `Live, updated ${new Date(time * 1000).toLocaleTimeString()}`;
      },
    },
    (open) => {
      if (!open) state.textContent = "The live stream is interrupted; reconnecting…";
    },
  );
  return () => {
    stopStream();
    for (const chart of [messages, connections, latency, queues, disk]) chart.destroy();
  };
}
