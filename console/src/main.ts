// The console's shell: asks `/api/v1/me` whether to show the login page,
// then routes `#/page` to one page module. A page mounts into <main> and
// returns what stops it (its streams and timers) when another is shown.

import "uplot/dist/uPlot.min.css";
import "./style.css";
import { get, post, setUnauthorizedHandler, type Me } from "./api";
import { button, fill, h } from "./dom";
import { loginPage } from "./pages/login";
import { overviewPage } from "./pages/overview";
import { clientsPage } from "./pages/clients";
import { sessionsPage } from "./pages/sessions";
import { subscriptionsPage } from "./pages/subscriptions";
import { retainedPage } from "./pages/retained";
import { topicsPage } from "./pages/topics";
import { publishPage } from "./pages/publish";
import { endpointsPage } from "./pages/endpoints";
import { twinsPage } from "./pages/twins";

export type Stop = () => void;
export type PageMount = (main: HTMLElement) => Stop;

const pages: Record<string, { title: string; mount: PageMount }> = {
  overview: { title: "Overview", mount: overviewPage },
  clients: { title: "Clients", mount: clientsPage },
  sessions: { title: "Sessions", mount: sessionsPage },
  subscriptions: { title: "Subscriptions", mount: subscriptionsPage },
  retained: { title: "Retained messages", mount: retainedPage },
  topics: { title: "Topic explorer", mount: topicsPage },
  publish: { title: "Publish", mount: publishPage },
  endpoints: { title: "Routes & endpoints", mount: endpointsPage },
  twins: { title: "Twins", mount: twinsPage },
};

const main = document.getElementById("main") as HTMLElement;
const nav = document.getElementById("nav") as HTMLElement;
const who = document.getElementById("who") as HTMLElement;
const banner = document.getElementById("banner") as HTMLElement;

let me: Me | null = null;
let stop: Stop = () => {};

function route(): void {
  stop();
  stop = () => {};
  if (me === null) {
    nav.hidden = true;
    banner.hidden = true;
    fill(who);
    document.title = "Sign in · Ferry console";
    stop = loginPage(main, (user) => {
      me = user;
      if (location.hash === "" || location.hash === "#/login") location.hash = "#/overview";
      else route();
    });
    return;
  }
  const name = location.hash.replace(/^#\/?/, "").split("?")[0] || "overview";
  const page = pages[name];
  if (!page) {
    location.hash = "#/overview";
    return;
  }
  nav.hidden = false;
  for (const link of nav.querySelectorAll("a")) {
    if (link.getAttribute("href") === `#/${name}`) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  showUser(me);
  document.title = `${page.title} · Ferry console`;
  fill(main, h("h1", {}, page.title));
  stop = page.mount(main);
}

function showUser(user: Me): void {
  if (user.username === "anonymous") {
    // The admin API's loopback rule: no password file and no JWT key,
    // and this listener is on loopback. Say so, since anyone on this
    // machine has the same access.
    banner.hidden = false;
    banner.textContent =
      "Open access: no users are configured and this listener is on loopback, so anyone on this machine can administer Ferry without signing in.";
    fill(who, h("span", {}, "Not signed in (loopback access)"));
    return;
  }
  banner.hidden = true;
  fill(
    who,
    h("span", {}, "Signed in as ", h("strong", { id: "username" }, user.username)),
    " ",
    button("Sign out", async () => {
      await post("/api/v1/logout").catch(() => undefined);
      me = null;
      route();
    }),
  );
}

setUnauthorizedHandler(() => {
  if (me !== null) {
    me = null;
    route();
  }
});

window.addEventListener("hashchange", route);
get<Me>("/api/v1/me")
  .then((user) => {
    me = user;
  })
  .catch(() => {
    me = null;
  })
  .finally(route);
