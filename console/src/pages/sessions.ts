// Sessions, online and offline; an offline one can be deleted (a
// connected client's session is its own: 409 `session_online`).

import { del, query, segment } from "../api";
import { button, field, h, num } from "../dom";
import type { Stop } from "../main";
import { PAGE_LIMIT, pagedList } from "../paged";

interface Session {
  client_id: string;
  online: boolean;
  expiry_interval: number | null;
  queued: number;
  subscriptions: number;
}

/** MQTT 5's session expiry interval that means "never expires". */
const NEVER = 0xffff_ffff;

export function sessionsPage(main: HTMLElement): Stop {
  const prefix = h("input", { name: "client_id_prefix", type: "search" });
  const state = h("select", { name: "state" }, h("option", { value: "" }, "any"), h("option", { value: "online" }, "online"), h("option", { value: "offline" }, "offline"));
  const list = pagedList<Session>(
    "Sessions",
    [
      { title: "Client id", cell: (s) => s.client_id },
      { title: "State", cell: (s) => (s.online ? "online" : "offline") },
      { title: "Expiry interval", cell: (s) => (s.expiry_interval === null || s.expiry_interval === NEVER ? "never" : `${num(s.expiry_interval)} s`), numeric: true },
      { title: "Queued", cell: (s) => num(s.queued), numeric: true },
      { title: "Subscriptions", cell: (s) => num(s.subscriptions), numeric: true },
      {
        title: "Action",
        cell: (s) => (s.online ? "connected" : button("Delete", () => void remove(s.client_id), { class: "danger", "aria-label": `Delete session ${s.client_id}` })),
      },
    ],
    "No session matches.",
    (page) => `/api/v1/sessions${query({ client_id_prefix: prefix.value, state: state.value, page, limit: PAGE_LIMIT })}`,
  );

  const remove = (id: string) =>
    list.act(`Delete the session of ${id}, its subscriptions and queued messages?`, () => del(`/api/v1/sessions/${segment(id)}`), `Deleted the session of ${id}.`);

  main.append(list.searchForm("Search", field("Client id prefix", prefix), field("State", state)), list.el);
  void list.load(1);
  return () => {};
}
