// Subscriptions, by client and by filter.

import { query } from "../api";
import { field, h } from "../dom";
import type { Stop } from "../main";
import { PAGE_LIMIT, pagedList } from "../paged";

interface Subscription {
  client_id: string;
  filter: string;
  qos: number;
  no_local?: boolean;
  retain_as_published?: boolean;
  retain_handling?: number;
}

const yesNo = (v: boolean | undefined) => (v === undefined ? "–" : v ? "yes" : "no");

export function subscriptionsPage(main: HTMLElement): Stop {
  const client = h("input", { name: "client_id", type: "search" });
  const filter = h("input", { name: "filter", type: "search" });
  const list = pagedList<Subscription>(
    "Subscriptions",
    [
      { title: "Client id", cell: (s) => s.client_id },
      { title: "Filter", cell: (s) => h("code", {}, s.filter) },
      { title: "QoS", cell: (s) => s.qos, numeric: true },
      { title: "No local", cell: (s) => yesNo(s.no_local) },
      { title: "Retain as published", cell: (s) => yesNo(s.retain_as_published) },
      { title: "Retain handling", cell: (s) => s.retain_handling ?? "–" },
    ],
    "No subscription matches.",
    (page) => `/api/v1/subscriptions${query({ client_id: client.value, filter: filter.value, page, limit: PAGE_LIMIT })}`,
  );
  main.append(list.searchForm("Search", field("Client id", client), field("Filter", filter)), list.el);
  void list.load(1);
  return () => {};
}
