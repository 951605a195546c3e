// Ferry's console in Debian's chromium, driven by playwright-core (never a
// downloaded browser). Started by tests/test_console.py, which runs a real
// ferry and real paho clients and passes what to look for in the
// environment; this script does the browser's part and the pytest checks
// what the browser did to the MQTT clients.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const env = (name) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const URL = env("FERRY_URL");
const MODE = env("CONSOLE_MODE"); // "login" or "anonymous"
const SHOTS = env("CONSOLE_SCREENSHOTS");
/** How long a page may take to show what it is waiting for. */
const WAIT_MS = 10_000;

let browser;
let page;
const problems = [];

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.setDefaultTimeout(WAIT_MS);
  // Every confirm() of a destructive button is accepted.
  page.on("dialog", (dialog) => void dialog.accept());
  // A CSP violation or a script error fails the run: the console must work under its own policy.
  page.on("console", (message) => {
    if (message.type() === "error" && !/Failed to load resource/.test(message.text())) problems.push(message.text());
  });
  page.on("pageerror", (error) => problems.push(String(error)));
});

after(async () => {
  await browser?.close();
});

const shot = (name) => page.screenshot({ path: join(SHOTS, `${MODE}-${name}.png`), fullPage: true });

/** Polls `read` until `check` holds of its value, or fails with the last value. */
async function until(what, read, check) {
  const deadline = Date.now() + WAIT_MS;
  let value;
  while (Date.now() < deadline) {
    value = await read();
    if (check(value)) return value;
    await page.waitForTimeout(100);
  }
  assert.fail(`${what}: still ${JSON.stringify(value)} after ${WAIT_MS} ms`);
}

async function go(hash) {
  await page.goto(`${URL}/#/${hash}`);
  await page.locator("h1").first().waitFor();
}

if (MODE === "anonymous") {
  test("on loopback with no users the console opens without a login and says so", async () => {
    await page.goto(`${URL}/`);
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    const banner = await page.locator("#banner").textContent();
    assert.match(banner, /no users are configured/);
    assert.equal(await page.getByLabel("Password").count(), 0);
    await until("connections tile", () => page.locator("#stat-connections").textContent(), (t) => t === env("EXPECT_CONNECTIONS"));
    await shot("overview");
  });
} else {
  test("a bad password is refused, a good one signs in", async () => {
    await page.goto(`${URL}/`);
    await page.getByRole("heading", { name: "Sign in to Ferry" }).waitFor();
    await page.getByLabel("User name").fill(env("FERRY_USER"));
    await page.getByLabel("Password").fill("not-the-password");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("Sign-in failed").waitFor();
    assert.match(await page.locator("form.login .status").textContent(), /Wrong user name or password/);
    await shot("login-refused");
    await page.getByLabel("Password").fill(env("FERRY_PASSWORD"));
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    assert.equal(await page.locator("#username").textContent(), env("FERRY_USER"));
  });

  test("the overview counts the paho clients and its chart moves", async () => {
    await go("overview");
    await until("connections tile", () => page.locator("#stat-connections").textContent(), (t) => t === env("EXPECT_CONNECTIONS"));
    const points = () => page.locator("#chart-messages").getAttribute("data-points").then(Number);
    const first = await until("points on the messages chart", points, (n) => n >= 1);
    await until("points on the messages chart", points, (n) => n >= first + 2);
    // paho publishes all along (test_console.py): some second shows messages in.
    await until("messages in per second", () => page.locator("#stat-rate_in").textContent(), (t) => t !== "–" && Number(t) > 0);
    // ...and the ticker's own subscription has them delivered, so some second has a latency.
    await until("latency tile", () => page.locator("#stat-latency").textContent(), (t) => /^[\d.]+ (µs|ms|s) \/ [\d.]+ (µs|ms|s)$/.test(t));
    const latencyPoints = () => page.locator("#chart-latency").getAttribute("data-points").then(Number);
    await until("points on the latency chart", latencyPoints, (n) => n >= 1);
    await shot("overview");
    await page.setViewportSize({ width: 390, height: 800 });
    await shot("overview-narrow");
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the narrow page scrolls sideways by ${overflow} px`);
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  test("the clients page finds a client by prefix and disconnects it", async () => {
    await go("clients");
    const id = env("DISCONNECT_CLIENT");
    await page.getByLabel("Client id prefix").fill(id.slice(0, -2));
    await page.getByRole("button", { name: "Search" }).click();
    await page.getByRole("button", { name: `Details of ${id}` }).waitFor();
    await until("rows", () => page.locator("tbody tr").count(), (n) => n === 1);
    await shot("clients");
    await page.getByRole("button", { name: `Disconnect ${id}` }).click();
    await page.getByText(`Disconnected ${id}.`).waitFor();
    await page.getByText("No client matches.").waitFor();
  });

  test("the sessions page deletes an offline session", async () => {
    await go("sessions");
    const id = env("OFFLINE_CLIENT");
    await page.getByLabel("State").selectOption("offline");
    await page.getByRole("button", { name: "Search" }).click();
    await page.getByRole("button", { name: `Delete session ${id}` }).click();
    await page.getByText(`Deleted the session of ${id}.`).waitFor();
    // The list reloads after the notice: wait for the row to go.
    await page.getByRole("button", { name: `Delete session ${id}` }).waitFor({ state: "detached" });
    await shot("sessions");
  });

  test("the subscriptions page finds a paho client's subscription", async () => {
    await go("subscriptions");
    await page.getByLabel("Client id").fill(env("SUBSCRIBER_CLIENT"));
    await page.getByRole("button", { name: "Search" }).click();
    await until("rows", () => page.locator("tbody tr").count(), (n) => n === 1);
    const cells = await page.locator("tbody tr td").allTextContents();
    assert.deepEqual(cells.slice(0, 3), [env("SUBSCRIBER_CLIENT"), env("SUBSCRIBER_FILTER"), "1"]);
    await page.getByLabel("Client id").fill("nobody-has-this-id");
    await page.getByRole("button", { name: "Search" }).click();
    await page.getByText("No subscription matches.").waitFor();
    await shot("subscriptions");
  });

  test("the retained page lists a retained message and deletes it", async () => {
    await go("retained");
    const topic = env("RETAINED_TOPIC");
    await page.getByRole("button", { name: `View ${topic}` }).click();
    await until("retained payload", () => page.locator("#retained-payload").textContent(), (t) => t === env("RETAINED_PAYLOAD"));
    await shot("retained");
    await page.getByRole("button", { name: `Delete ${topic}` }).click();
    await page.getByText(`Deleted the retained message of ${topic}.`).waitFor();
    await page.getByRole("button", { name: `View ${topic}` }).waitFor({ state: "detached" });
  });

  test("the topic explorer shows what paho publishes", async () => {
    await go("topics");
    await page.getByLabel("Topic filter").fill(env("EXPLORE_FILTER"));
    await page.getByRole("button", { name: "Subscribe" }).click();
    await page.locator("#messages li").first().waitFor();
    const text = await page.locator("#messages li").first().textContent();
    assert.match(text, new RegExp(env("EXPLORE_PAYLOAD_PREFIX")));
    await shot("topics");
    await page.getByRole("button", { name: "Stop" }).click();
  });

  test("the publish form reaches a paho subscriber", async () => {
    await go("publish");
    await page.getByLabel("Topic", { exact: true }).fill(env("PUBLISH_TOPIC"));
    await page.getByLabel("Payload").fill(env("PUBLISH_PAYLOAD"));
    await page.getByLabel("QoS").selectOption("1");
    await page.getByRole("button", { name: "Publish" }).click();
    await page.getByText(/delivered to 1 subscriber\./).waitFor();
    await shot("publish");
  });

  test("the endpoints page shows a topic endpoint and pauses it", async () => {
    await go("endpoints");
    const name = env("ENDPOINT_NAME");
    await page.getByRole("button", { name: `Pause ${name}` }).click();
    await page.getByText(`Paused ${name}.`).waitFor();
    await page.getByRole("button", { name: `Resume ${name}` }).waitFor();
    const row = page.locator("tr", { has: page.getByRole("button", { name: `Resume ${name}` }) });
    assert.match(await row.textContent(), /topic/);
    assert.match(await row.textContent(), /paused/);
    await shot("endpoints");
  });

  test("the twins browser finds a thing and shows its JSON", async () => {
    await go("twins");
    const id = env("THING_ID");
    await page.getByLabel(/RQL filter/).fill(`eq(thingId,"${id}")`);
    await page.getByRole("button", { name: "Search" }).click();
    await page.getByRole("button", { name: `View thing ${id}` }).click();
    const text = await until("thing JSON", () => page.locator("#thing-json").textContent(), (t) => t?.includes(id));
    const json = JSON.parse(text);
    assert.equal(json.thingId, id);
    assert.deepEqual(json.attributes, JSON.parse(env("THING_ATTRIBUTES")));
    await shot("twins");
  });
}

test("no script error and no CSP violation", () => {
  assert.deepEqual(problems, []);
});
