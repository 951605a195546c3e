// The publish form: `POST /api/v1/publish` as the signed-in admin.

import { post, errorText } from "../api";
import { field, h, status } from "../dom";
import type { Stop } from "../main";

export function publishPage(main: HTMLElement): Stop {
  const topic = h("input", { name: "topic", required: true });
  const payload = h("textarea", { name: "payload", rows: 6 });
  const qos = h("select", { name: "qos" }, h("option", { value: "0" }, "0 (at most once)"), h("option", { value: "1" }, "1 (at least once)"), h("option", { value: "2" }, "2 (exactly once)"));
  const retain = h("input", { name: "retain", type: "checkbox" });
  const contentType = h("input", { name: "content_type", placeholder: "application/json" });
  const expiry = h("input", { name: "message_expiry_interval", type: "number", min: 0 });
  const line = status();
  const submit = h("button", { type: "submit" }, "Publish");
  const form = h(
    "form",
    { class: "publish" },
    field("Topic", topic),
    field("Payload", payload),
    field("QoS", qos),
    h("div", { class: "field check" }, retain, h("label", { for: (retain.id = "publish-retain") }, "Retain")),
    field("Content type (MQTT 5)", contentType),
    field("Message expiry interval, seconds (MQTT 5)", expiry),
    submit,
    line.el,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    submit.disabled = true;
    line.clear();
    const properties: Record<string, unknown> = {};
    if (contentType.value) properties.content_type = contentType.value;
    if (expiry.value) properties.message_expiry_interval = Number(expiry.value);
    try {
      const result = await post<{ delivered_to: number }>("/api/v1/publish", {
        topic: topic.value,
        payload: payload.value,
        qos: Number(qos.value),
        retain: retain.checked,
        properties,
      });
      line.ok(`Published to ${topic.value}: delivered to ${result.delivered_to} subscriber${result.delivered_to === 1 ? "" : "s"}.`);
    } catch (e) {
      line.error(`Not published: ${errorText(e)}`);
    } finally {
      submit.disabled = false;
    }
  });
  main.append(form);
  return () => {};
}
