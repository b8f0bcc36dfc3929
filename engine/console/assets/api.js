// The console's API: reads, the requests that change state, and navigation between views.

// The session: who we are, whether actions are on, the token requests that change state carry.
export let session = {actions: false, token: ''};

export function setSession(s) {
  session = s;
}

// api reads /console/api/PATH with query parameters; it throws the engine's error description.
export async function api(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, v);
  }
  const s = q.toString();
  const res = await fetch('/console/api/' + path + (s ? '?' + s : ''), {headers: {'Accept': 'application/json'}});
  return decode(res);
}

// post sends a request that changes state, with the session's token.
export async function post(path, body) {
  const res = await fetch('/console/api/' + path, {
    method: 'POST',
    headers: {'Content-Type': 'application/json', 'X-Console-Token': session.token},
    body: JSON.stringify(body),
  });
  return decode(res);
}

async function decode(res) {
  let body;
  try {
    body = await res.json();
  } catch {
    throw new Error(`${res.status} ${res.statusText}`);
  }
  if (!res.ok) {
    const e = new Error(body && body.error ? `${body.error.code}: ${body.error.description}` : `${res.status}`);
    e.status = res.status;
    throw e;
  }
  return body;
}

// navigate shows another view without loading the page again (app.js routes on popstate).
export function navigate(url) {
  history.pushState(null, '', url);
  window.dispatchEvent(new PopStateEvent('popstate'));
}
