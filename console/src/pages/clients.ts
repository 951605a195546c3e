// Connected clients: search by client id prefix and user, page, look at
// one (its subscriptions), disconnect one.

import { del, get, query, segment, errorText } from "../api";
import { bytes, button, field, fill, h, num, table, when } from "../dom";
import type { Stop } from "../main";
import { PAGE_LIMIT, pagedList } from "../paged";

interface Client {
  client_id: string;
  username: string | null;
  address: string;
  protocol: string;
  keep_alive: number;
  clean_start: boolean;
  connected_at: string;
  subscriptions: number;
  inflight: number;
  queued: number;
  bytes_in: number;
  bytes_out: number;
  messages_in: number;
  messages_out: number;
  listener: string;
}

interface Subscription {
  filter: string;
  qos: number;
  no_local: boolean;
  retain_as_published: boolean;
  retain_handling: number;
}

export function clientsPage(main: HTMLElement): Stop {
  const prefix = h("input", { name: "client_id_prefix", type: "search" });
  const user = h("input", { name: "username", type: "search" });
  const details = h("section", { class: "details", "aria-live": "polite" });

  const list = pagedList<Client>(
    "Connected clients",
    [
      { title: "Client id", cell: (c) => button(c.client_id, () => void show(c.client_id), { class: "link", "aria-label": `Details of ${c.client_id}` }) },
      { title: "User", cell: (c) => c.username ?? "–" },
      { title: "Address", cell: (c) => c.address },
      { title: "Protocol", cell: (c) => c.protocol },
      { title: "Connected since", cell: (c) => when(c.connected_at) },
      { title: "Subscriptions", cell: (c) => num(c.subscriptions), numeric: true },
      { title: "Messages in / out", cell: (c) => `${num(c.messages_in)} / ${num(c.messages_out)}`, numeric: true },
      { title: "Bytes in / out", cell: (c) => `${bytes(c.bytes_in)} / ${bytes(c.bytes_out)}`, numeric: true },
      { title: "Action", cell: (c) => button("Disconnect", () => void disconnect(c.client_id), { class: "danger", "aria-label": `Disconnect ${c.client_id}` }) },
    ],
    "No client matches.",
    (page) => `/api/v1/clients${query({ client_id_prefix: prefix.value, username: user.value, page, limit: PAGE_LIMIT })}`,
  );

  const disconnect = (id: string) =>
    list.act(`Disconnect client ${id}?`, () => del(`/api/v1/clients/${segment(id)}${query({ reason: "disconnected from the console" })}`), `Disconnected ${id}.`);

  async function show(id: string): Promise<void> {
    try {
      const client = await get<Omit<Client, "subscriptions"> & { subscriptions: Subscription[] }>(`/api/v1/clients/${segment(id)}`);
      fill(
        details,
        h("h2", {}, `Client ${client.client_id}`),
        h(
          "dl",
          { class: "facts" },
          ...(
            [
              ["User", client.username ?? "–"],
              ["Address", client.address],
              ["Listener", client.listener],
              ["Protocol", client.protocol],
              ["Keep-alive", `${client.keep_alive} s`],
              ["Clean start", client.clean_start ? "yes" : "no"],
              ["Connected since", when(client.connected_at)],
              ["In flight", num(client.inflight)],
              ["Queued", num(client.queued)],
            ] as const
          ).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
        ),
        table(
          "Subscriptions",
          [
            { title: "Filter", cell: (s: Subscription) => h("code", {}, s.filter) },
            { title: "QoS", cell: (s) => s.qos, numeric: true },
            { title: "No local", cell: (s) => (s.no_local ? "yes" : "no") },
            { title: "Retain as published", cell: (s) => (s.retain_as_published ? "yes" : "no") },
            { title: "Retain handling", cell: (s) => s.retain_handling },
          ],
          client.subscriptions,
          "No subscriptions.",
        ),
      );
    } catch (e) {
      fill(details, h("p", { class: "status error" }, errorText(e)));
    }
  }

  main.append(list.searchForm("Search", field("Client id prefix", prefix), field("User", user)), list.el, details);
  void list.load(1);
  return () => {};
}
