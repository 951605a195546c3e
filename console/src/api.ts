// The admin API (`/api/v1`) and the twin API (`/api/2`), same origin, with
// the session cookie `POST /api/v1/login` set. Every data call goes
// through the server's authentication: the console holds no secret.

/** An error answer: Ferry's `{status, error, message}` (Ditto's `{status, error, message}` too). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Called on any 401: the session ended, the login page is shown. */
let onUnauthorized: () => void = () => {};

export function setUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

export async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  const init: RequestInit = { method, credentials: "same-origin", headers: { accept: "application/json" } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { ...init.headers, "content-type": "application/json" };
  }
  let response: Response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, "network", `Ferry did not answer: ${String(e)}`);
  }
  const text = await response.text();
  let json: unknown = undefined;
  if (text) {
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
  }
  if (!response.ok) {
    const err = (json ?? {}) as { error?: string; message?: string };
    if (response.status === 401 && !path.endsWith("/login")) onUnauthorized();
    throw new ApiError(response.status, err.error ?? "error", err.message ?? `${response.status} ${response.statusText}`);
  }
  return json as T;
}

export const get = <T>(path: string) => request<T>("GET", path);
export const post = <T>(path: string, body?: unknown) => request<T>("POST", path, body);
export const del = (path: string) => request<void>("DELETE", path);

/** A query string of the non-empty values. */
export function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/** A path segment (a client id, an endpoint name) encoded as one segment. */
export const segment = encodeURIComponent;

/** A topic as the path of `/api/v1/retained/{topic…}`: its levels kept, each one encoded. */
export function topicPath(topic: string): string {
  return topic.split("/").map(encodeURIComponent).join("/");
}

export interface Page<T> {
  data: T[];
  meta: { page: number; limit: number; count: number };
}

export interface Me {
  username: string;
}

/**
 * A Server-Sent Events stream: `handlers` by event name. An error while
 * connecting asks `/me` whether the session ended; EventSource retries by
 * itself otherwise.
 */
export function stream(path: string, handlers: Record<string, (data: unknown) => void>, onState: (open: boolean) => void): () => void {
  const source = new EventSource(path, { withCredentials: true });
  for (const [name, handler] of Object.entries(handlers)) {
    source.addEventListener(name, (event) => {
      try {
        handler(JSON.parse((event as MessageEvent<string>).data));
      } catch {
        // a malformed event is skipped: the next one is whole
      }
    });
  }
  source.onopen = () => onState(true);
  source.onerror = () => {
    onState(false);
    get<Me>("/api/v1/me").catch(() => {
      source.close();
    });
  };
  return () => source.close();
}

/** What an error says, for a status line. */
export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
