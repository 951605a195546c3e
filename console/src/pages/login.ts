// The login page: `POST /api/v1/login` sets the session cookie.

import { ApiError, post, type Me } from "../api";
import { field, fill, h, status } from "../dom";
import type { Stop } from "../main";

export function loginPage(main: HTMLElement, done: (me: Me) => void): Stop {
  const username = h("input", { name: "username", autocomplete: "username", required: true });
  const password = h("input", { name: "password", type: "password", autocomplete: "current-password", required: true });
  const line = status();
  const submit = h("button", { type: "submit" }, "Sign in");
  const form = h(
    "form",
    { class: "login", "aria-labelledby": "login-title" },
    h("h1", { id: "login-title" }, "Sign in to Ferry"),
    h("p", {}, "Use a Ferry user with the admin role ([admin] users or groups)."),
    field("User name", username),
    field("Password", password),
    submit,
    line.el,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    submit.disabled = true;
    line.clear();
    try {
      const me = await post<Me>("/api/v1/login", { username: username.value, password: password.value });
      done(me);
    } catch (e) {
      const message = e instanceof ApiError && e.status === 401 ? "Wrong user name or password." : e instanceof ApiError && e.status === 403 ? "This user is not an admin." : String((e as Error).message);
      line.error(`Sign-in failed: ${message}`);
      password.select();
    } finally {
      submit.disabled = false;
    }
  });
  fill(main, form);
  username.focus();
  return () => {};
}
