// The topic explorer: `GET /api/v1/topics/stream?filter=` subscribes in
// the broker for as long as the stream is open and sends what matches.

import { stream } from "../api";
import { button, field, fill, h, payloadText } from "../dom";
import type { Stop } from "../main";

interface Message {
  topic: string;
  qos: number;
  retain: boolean;
  payload: string | null;
  payload_base64: string;
  time: string;
}

/** Messages kept on screen: the newest, so a busy filter cannot fill the tab's memory. */
const SHOWN_MESSAGES = 500;

export function topicsPage(main: HTMLElement): Stop {
  const filter = h("input", { name: "filter", value: "#", required: true });
  const toggle = h("button", { type: "submit" }, "Subscribe");
  const state = h("p", { class: "status", role: "status" }, "Not subscribed.");
  const received = h("span", { id: "received-count" }, "0");
  const dropped = h("span", { id: "dropped-count" }, "0");
  const list = h("ol", { class: "messages", id: "messages", "aria-label": "Messages received, newest first" });
  let stopStream: Stop | null = null;
  let count = 0;

  function stop(): void {
    stopStream?.();
    stopStream = null;
    toggle.textContent = "Subscribe";
    filter.disabled = false;
  }

  function start(): void {
    const topicFilter = filter.value.trim();
    if (!topicFilter) return;
    count = 0;
    fill(received, "0");
    fill(dropped, "0");
    fill(list);
    toggle.textContent = "Stop";
    filter.disabled = true;
    state.textContent = `Subscribing to ${topicFilter}…`;
    stopStream = stream(
      `/api/v1/topics/stream?filter=${encodeURIComponent(topicFilter)}`,
      {
        message: (data) => {
          const m = data as Message;
          count++;
          fill(received, String(count));
          const item = h(
            "li",
            {},
            h("div", { class: "meta" }, h("code", { class: "topic" }, m.topic), ` QoS ${m.qos}`, m.retain ? " retained" : "", ` · ${new Date(m.time).toLocaleTimeString()}`),
            h("pre", { class: "payload" }, payloadText(m.payload, m.payload_base64)),
          );
          list.prepend(item);
          while (list.childElementCount > SHOWN_MESSAGES) list.lastElementChild?.remove();
        },
        dropped: (data) => {
          fill(dropped, String((data as { count: number }).count));
        },
      },
      (open) => {
        state.textContent = open ? `Subscribed to ${topicFilter}; messages appear as they are published.` : "The stream is interrupted; reconnecting…";
      },
    );
  }

  const form = h("form", { class: "search" }, field("Topic filter", filter), toggle);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (stopStream) stop();
    else start();
  });
  main.append(
    form,
    state,
    h("p", {}, "Received: ", received, " · Lost because this page was too slow: ", dropped, " ", button("Clear", () => fill(list))),
    list,
  );
  return stop;
}
