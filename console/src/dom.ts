// Small DOM helpers: every page builds its elements with `h` and never
// with innerHTML, so text from the broker (topics, payloads, client ids)
// can never become markup.

type Attrs = Record<string, string | number | boolean | EventListener | undefined>;
export type Child = Node | string | number | null | undefined | false;

/** An element with attributes (`on…` are listeners) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (value === true) {
      el.setAttribute(name, "");
    } else {
      el.setAttribute(name, String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

/** Replaces an element's children. */
export function fill(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

let nextId = 0;

/** A labelled form field: the label names the control for screen readers. */
export function field(label: string, control: HTMLElement): HTMLElement {
  const id = control.id || `f${++nextId}`;
  control.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, label), control);
}

export interface Column<T> {
  title: string;
  cell: (row: T) => Child;
  numeric?: boolean;
}

/** A table with a caption; `empty` is shown as its one row when there is no data. */
export function table<T>(caption: string, columns: Column<T>[], rows: T[], empty: string): HTMLElement {
  const head = h("tr", {}, ...columns.map((c) => h("th", { scope: "col", class: c.numeric ? "num" : undefined }, c.title)));
  const body = h("tbody");
  if (rows.length === 0) {
    body.appendChild(h("tr", {}, h("td", { colspan: columns.length, class: "empty" }, empty)));
  }
  for (const row of rows) {
    body.appendChild(h("tr", {}, ...columns.map((c) => h("td", { class: c.numeric ? "num" : undefined }, c.cell(row)))));
  }
  return h("div", { class: "table-wrap" }, h("table", {}, h("caption", {}, caption), h("thead", {}, head), body));
}

/** A status line for a page: errors are announced to screen readers. */
export function status(): { el: HTMLElement; ok: (text: string) => void; error: (text: string) => void; clear: () => void } {
  const el = h("p", { class: "status", role: "status", "aria-live": "polite" });
  return {
    el,
    ok: (text) => {
      el.className = "status ok";
      el.textContent = text;
    },
    error: (text) => {
      el.className = "status error";
      el.textContent = text;
    },
    clear: () => {
      el.className = "status";
      el.textContent = "";
    },
  };
}

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

export function num(n: number | null | undefined): string {
  return n === null || n === undefined ? "–" : n.toLocaleString("en");
}

export function when(text: string | null | undefined): string {
  if (!text) return "–";
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? text : date.toLocaleString();
}

export function button(text: string, onclick: () => void, attrs: Attrs = {}): HTMLButtonElement {
  return h("button", { type: "button", ...attrs, onclick: () => onclick() }, text);
}

/** A payload as text, or its base64 when it is not UTF-8 (the API's `payload` is null then). */
export function payloadText(payload: string | null, base64: string): string {
  return payload ?? `base64: ${base64}`;
}
