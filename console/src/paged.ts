// A paged list of an admin API collection (`{data, meta:{page,limit,count}}`):
// the table, "Previous"/"Next" and the count, shared by the pages that list.

import { errorText, get, type Page } from "./api";
import { button, fill, h, status, table, type Column } from "./dom";

/** Rows per page: enough to scan, small enough to render at once. */
export const PAGE_LIMIT = 50;

export interface PagedList {
  el: HTMLElement;
  /** Loads `page` (1-based) of the collection at `path(page)`. */
  load: (page?: number) => Promise<void>;
  status: ReturnType<typeof status>;
  /** The search form in front of the list: submitting it loads page 1. */
  searchForm: (submit: string, ...fields: HTMLElement[]) => HTMLFormElement;
  /** Asks `question`; if confirmed runs `call`, says `done` or the error, and loads the page again. */
  act: (question: string, call: () => Promise<unknown>, done: string) => Promise<void>;
}

export function pagedList<T>(caption: string, columns: Column<T>[], empty: string, path: (page: number) => string): PagedList {
  const body = h("div");
  const line = status();
  const info = h("span", { class: "page-info" });
  let page = 1;
  let pages = 1;
  const previous = button("Previous page", () => void load(page - 1));
  const next = button("Next page", () => void load(page + 1));
  const pager = h("div", { class: "pager" }, previous, info, next);

  async function load(wanted = page): Promise<void> {
    try {
      const result = await get<Page<T>>(path(wanted));
      page = result.meta?.page ?? wanted;
      const count = result.meta?.count ?? result.data.length;
      const limit = result.meta?.limit ?? PAGE_LIMIT;
      pages = Math.max(1, Math.ceil(count / limit));
      fill(body, table(caption, columns, result.data, empty));
      fill(info, `Page ${page} of ${pages} (${count} in all)`);
      previous.disabled = page <= 1;
      next.disabled = page >= pages;
    } catch (e) {
      line.error(errorText(e));
    }
  }

  function searchForm(submit: string, ...fields: HTMLElement[]): HTMLFormElement {
    const form = h("form", { class: "search", role: "search" }, ...fields, h("button", { type: "submit" }, submit));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      void load(1);
    });
    return form;
  }

  async function act(question: string, call: () => Promise<unknown>, done: string): Promise<void> {
    if (!confirm(question)) return;
    try {
      await call();
      line.ok(done);
    } catch (e) {
      line.error(errorText(e));
    }
    await load();
  }

  return { el: h("div", {}, line.el, body, pager), load, status: line, searchForm, act };
}
