// The twins browser: Ditto's search (`/api/2/search/things`) with an RQL
// filter and cursor paging, and one thing's JSON. The console's session
// is accepted by `/api/2` as the user `nginx:<user>`.

import { ApiError, get, query, segment, errorText } from "../api";
import { button, field, fill, h, status, table } from "../dom";
import type { Stop } from "../main";

interface Thing {
  thingId: string;
  policyId?: string;
  _revision?: number;
  _modified?: string;
  attributes?: unknown;
}

interface SearchAnswer {
  items: Thing[];
  cursor?: string;
}

export function twinsPage(main: HTMLElement): Stop {
  const filter = h("input", { name: "filter", type: "search", placeholder: 'like(thingId,"org.example:*")' });
  const size = h("select", { name: "size" }, ...[10, 25, 50, 100, 200].map((n) => h("option", { value: n, selected: n === 25 }, String(n))));
  const line = status();
  const results = h("div");
  const details = h("section", { class: "details", "aria-live": "polite" });
  const more = button("Next page", () => void search(cursor));
  more.hidden = true;
  let cursor: string | undefined;

  async function search(after?: string): Promise<void> {
    line.clear();
    try {
      // A continued search repeats nothing but the cursor: it carries the filter and sort.
      const params = after ? { option: `size(${size.value}),cursor(${after})` } : { filter: filter.value.trim(), option: `size(${size.value}),sort(+thingId)`, fields: "thingId,policyId,_revision,_modified" };
      const answer = await get<SearchAnswer>(`/api/2/search/things${query(params)}`);
      cursor = answer.cursor;
      more.hidden = !cursor;
      fill(
        results,
        table(
          "Things",
          [
            { title: "Thing id", cell: (t: Thing) => button(t.thingId, () => void view(t.thingId), { class: "link", "aria-label": `View thing ${t.thingId}` }) },
            { title: "Policy", cell: (t) => t.policyId ?? "–" },
            { title: "Revision", cell: (t) => t._revision ?? "–", numeric: true },
            { title: "Modified", cell: (t) => t._modified ?? "–" },
          ],
          answer.items,
          "No thing matches.",
        ),
      );
    } catch (e) {
      line.error(e instanceof ApiError ? `${e.code}: ${e.message}` : String(e));
    }
  }

  async function view(id: string): Promise<void> {
    try {
      const thing = await get<Thing>(`/api/2/things/${segment(id)}`);
      fill(details, h("h2", {}, `Thing ${id}`), h("pre", { class: "json", id: "thing-json" }, JSON.stringify(thing, null, 2)));
    } catch (e) {
      fill(details, h("p", { class: "status error" }, errorText(e)));
    }
  }

  const form = h(
    "form",
    { class: "search", role: "search" },
    field("RQL filter (empty: every thing you may read)", filter),
    field("Page size", size),
    h("button", { type: "submit" }, "Search"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void search();
  });
  main.append(form, line.el, results, more, details);
  void search();
  return () => {};
}
