// Routes and endpoints: each endpoint's state, queue and figures, with
// pause and resume; refreshed every two seconds while shown.

import { get, post, segment, errorText } from "../api";
import { bytes, button, fill, h, num, status, table, when } from "../dom";
import type { Stop } from "../main";

interface Endpoint {
  name: string;
  type: string;
  state: string;
  queued_messages?: number;
  queued_bytes?: number;
  oldest_age_seconds?: number | null;
  sent?: number;
  dropped?: Record<string, number> | number;
  backoff_until?: string | null;
}

type Route = Record<string, unknown> & { name?: string };

/** The API answers a list as `{data: […]}`; a bare array is read the same. */
function rows<T>(answer: T[] | { data: T[] }): T[] {
  return Array.isArray(answer) ? answer : (answer.data ?? []);
}

function dropped(d: Endpoint["dropped"]): string {
  if (d === undefined) return "–";
  if (typeof d === "number") return num(d);
  const reasons = Object.entries(d).filter(([, n]) => n > 0);
  return reasons.length === 0 ? "0" : reasons.map(([reason, n]) => `${reason}: ${num(n)}`).join(", ");
}

/** How often the tables are fetched again: endpoint states change by the second. */
const REFRESH_MS = 2000;

export function endpointsPage(main: HTMLElement): Stop {
  const line = status();
  const endpoints = h("section", { "aria-labelledby": "endpoints-title" });
  const routes = h("section", { "aria-labelledby": "routes-title" });

  async function act(name: string, action: "pause" | "resume"): Promise<void> {
    try {
      await post(`/api/v1/endpoints/${segment(name)}/${action}`);
      line.ok(`${action === "pause" ? "Paused" : "Resumed"} ${name}.`);
    } catch (e) {
      line.error(errorText(e));
    }
    await load();
  }

  async function load(): Promise<void> {
    try {
      const [e, r] = await Promise.all([get<Endpoint[] | { data: Endpoint[] }>("/api/v1/endpoints"), get<Route[] | { data: Route[] }>("/api/v1/routes")]);
      fill(
        endpoints,
        h("h2", { id: "endpoints-title" }, "Endpoints"),
        table(
          "Endpoints and their queues",
          [
            { title: "Name", cell: (x: Endpoint) => x.name },
            { title: "Type", cell: (x) => x.type },
            { title: "State", cell: (x) => h("span", { class: `state state-${x.state}` }, x.state) },
            { title: "Queued", cell: (x) => `${num(x.queued_messages)} (${bytes(x.queued_bytes)})`, numeric: true },
            { title: "Oldest", cell: (x) => (x.oldest_age_seconds == null ? "–" : `${num(Math.round(x.oldest_age_seconds))} s`), numeric: true },
            { title: "Sent", cell: (x) => num(x.sent), numeric: true },
            { title: "Dropped", cell: (x) => dropped(x.dropped) },
            { title: "Backoff until", cell: (x) => when(x.backoff_until) },
            {
              title: "Action",
              cell: (x) =>
                x.state === "paused"
                  ? button("Resume", () => void act(x.name, "resume"), { "aria-label": `Resume ${x.name}` })
                  : button("Pause", () => void act(x.name, "pause"), { "aria-label": `Pause ${x.name}` }),
            },
          ],
          rows(e),
          "No endpoints are configured.",
        ),
      );
      fill(
        routes,
        h("h2", { id: "routes-title" }, "Routes"),
        table(
          "Routes",
          [
            { title: "Name", cell: (x: Route) => String(x.name ?? "–") },
            {
              title: "Definition",
              cell: (x) => {
                const { name: _, ...rest } = x;
                return h("code", {}, typeof rest.route === "string" ? rest.route : JSON.stringify(rest));
              },
            },
          ],
          rows(r),
          "No routes are configured.",
        ),
      );
    } catch (e) {
      line.error(errorText(e));
    }
  }

  main.append(line.el, endpoints, routes);
  void load();
  const timer = setInterval(() => void load(), REFRESH_MS);
  return () => clearInterval(timer);
}
