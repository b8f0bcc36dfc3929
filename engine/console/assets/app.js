// The console's page: one document, a view per URL under /console/ (the URL holds every
// parameter of a view, so that each is a link to share), data from /console/api/.
import {h, fill, errorBox} from './dom.js';
import {overview} from './overview.js';
import {topics, topic} from './topics.js';
import {groups, group} from './groups.js';
import {messages} from './messages.js';
import {message} from './message.js';
import {api, session, setSession, navigate} from './api.js';

const views = {
  '': overview,
  'topics': topics,
  'topic': topic,
  'groups': groups,
  'group': group,
  'messages': messages,
  'message': message,
};

let cleanup = null; // the current view's: stops its timers
let shown = 0;      // counts routes: a view whose route is no longer the last one is dropped

// route shows the view of the current URL. Each view draws into an element of its own, in
// main: a view still fetching when the user moves on draws into its element, no longer in the
// page, and its timers are stopped as soon as it returns, rather than drawing over the next
// view or polling on.
async function route() {
  const mine = ++shown;
  if (cleanup) cleanup();
  cleanup = null;
  const main = document.getElementById('main');
  const path = location.pathname.replace(/^\/console\/?/, '').replace(/\/$/, '');
  const params = Object.fromEntries(new URLSearchParams(location.search));
  for (const a of document.querySelectorAll('#nav a')) {
    const v = a.dataset.view;
    a.classList.toggle('active', v === path || (v === 'topics' && path === 'topic') ||
      (v === 'groups' && path === 'group') || (v === 'messages' && path === 'message'));
  }
  const view = views[path];
  if (!view) {
    fill(main, h('h1', {}, 'Not found'), h('p', {}, 'No console view at ' + location.pathname + '.'));
    return;
  }
  main.dataset.view = path || 'overview';
  main.dataset.ready = '';
  const el = h('div', {class: 'view'});
  fill(main, el);
  let stop = null;
  try {
    stop = await view(el, params);
  } catch (err) {
    fill(el, errorBox(err));
  }
  if (mine !== shown) {
    if (stop) stop();
    return;
  }
  cleanup = stop;
  main.dataset.ready = 'true';
}

document.addEventListener('click', (ev) => {
  const a = ev.target.closest('a');
  if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || a.target || a.hasAttribute('download')) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith('/console/') || url.pathname.startsWith('/console/api/')) return;
  ev.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener('popstate', route);

async function start() {
  try {
    setSession(await api('session'));
  } catch (err) {
    fill(document.getElementById('main'), errorBox(err));
    return;
  }
  const who = document.getElementById('who');
  fill(who, session.user ? session.user + ' · ' : '', session.actions ? 'actions on' : 'read-only');
  who.dataset.actions = session.actions ? 'on' : 'off';
  route();
}

start();
