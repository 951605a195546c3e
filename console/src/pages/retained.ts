// Retained messages: list by filter, view one (text or base64), delete one.

import { del, get, query, topicPath, errorText } from "../api";
import { bytes, button, field, fill, h, payloadText } from "../dom";
import type { Stop } from "../main";
import { PAGE_LIMIT, pagedList } from "../paged";

interface Retained {
  topic: string;
  qos: number;
  payload: string | null;
  payload_base64: string;
  size: number;
  properties?: Record<string, unknown>;
}

/** Characters of a payload shown in the table; the whole one is under "View". */
const PREVIEW_CHARS = 80;

function preview(m: Retained): string {
  const text = payloadText(m.payload, m.payload_base64);
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS)}…` : text;
}

export function retainedPage(main: HTMLElement): Stop {
  const filter = h("input", { name: "filter", type: "search", value: "#" });
  const details = h("section", { class: "details", "aria-live": "polite" });
  const list = pagedList<Retained>(
    "Retained messages",
    [
      { title: "Topic", cell: (m) => h("code", {}, m.topic) },
      { title: "QoS", cell: (m) => m.qos, numeric: true },
      { title: "Size", cell: (m) => bytes(m.size), numeric: true },
      { title: "Payload", cell: (m) => h("span", { class: "payload" }, preview(m)) },
      {
        title: "Actions",
        cell: (m) =>
          h(
            "span",
            { class: "actions" },
            button("View", () => void view(m.topic), { "aria-label": `View ${m.topic}` }),
            button("Delete", () => void remove(m.topic), { class: "danger", "aria-label": `Delete ${m.topic}` }),
          ),
      },
    ],
    "No retained message matches.",
    (page) => `/api/v1/retained${query({ filter: filter.value || "#", page, limit: PAGE_LIMIT })}`,
  );

  async function view(topic: string): Promise<void> {
    try {
      const m = await get<Retained>(`/api/v1/retained/${topicPath(topic)}`);
      fill(
        details,
        h("h2", {}, "Retained message"),
        h("dl", { class: "facts" }, h("dt", {}, "Topic"), h("dd", {}, h("code", {}, m.topic)), h("dt", {}, "QoS"), h("dd", {}, m.qos), h("dt", {}, "Size"), h("dd", {}, bytes(m.size))),
        h("h3", {}, "Payload"),
        h("pre", { class: "json", id: "retained-payload" }, payloadText(m.payload, m.payload_base64)),
        m.properties ? h("h3", {}, "Properties") : null,
        m.properties ? h("pre", { class: "json" }, JSON.stringify(m.properties, null, 2)) : null,
      );
    } catch (e) {
      fill(details, h("p", { class: "status error" }, errorText(e)));
    }
  }

  const remove = (topic: string) =>
    list.act(
      `Delete the retained message of ${topic}?`,
      async () => {
        await del(`/api/v1/retained/${topicPath(topic)}`);
        fill(details);
      },
      `Deleted the retained message of ${topic}.`,
    );

  main.append(list.searchForm("List", field("Topic filter", filter)), list.el, details);
  void list.load(1);
  return () => {};
}
