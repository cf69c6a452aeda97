// The play page's behaviour beyond htmx: where focus goes after a command,
// what happens to the turn box, Stop's immediate feedback, Escape for the
// inspector, and announcing a finished narration to screen readers.
(function () {
  "use strict";
  const box = () => document.getElementById("turn-text");
  let commandId = null;
  let restored = null;

  // The turn box stays at the foot of the window over the story. The
  // window's scroll padding is kept at the box's height, so what is scrolled
  // into view (the newest narration, a refusal, a focused link) lands above
  // the box, never under it.
  const turnForm = () => document.getElementById("turn-form");
  function reserveTurnBox() {
    const form = turnForm();
    if (form) document.documentElement.style.scrollPaddingBottom = `${form.offsetHeight}px`;
  }
  if (window.ResizeObserver && turnForm()) new ResizeObserver(reserveTurnBox).observe(turnForm());

  // The story's end (the newest narration, its tools, any refusal, Undo and
  // Redo) above the turn box.
  function showNewest() {
    reserveTurnBox();
    const story = document.getElementById("story");
    if (story) story.scrollIntoView({ block: "end" });
  }

  // Whether the reader is at the story's end (and so follows a narration as
  // it grows) or has scrolled up to read, or on past it.
  function atNewest() {
    const story = document.getElementById("story");
    const form = turnForm();
    if (!story || !form) return false;
    const end = story.getBoundingClientRect().bottom;
    return end >= 0 && end <= Math.min(form.getBoundingClientRect().top, window.innerHeight) + 32;
  }

  let followOnSwap = false;
  document.addEventListener("htmx:beforeRequest", (event) => {
    const elt = event.detail.elt;
    const button = elt.querySelector && elt.querySelector("button");
    commandId = button && button.id ? button.id : null;
    // A command shows its outcome; a finished stream's reload, and a change
    // made elsewhere (js/live.js, from #live), keep the reader where they are.
    if (event.detail.target && event.detail.target.id === "story") {
      followOnSwap = elt.classList.contains("working") || elt.id === "live" ? atNewest() : true;
    }
  });

  // A narration in flight grows chunk by chunk; its end stays in view unless the reader scrolled away.
  let followStream = false;
  document.addEventListener("htmx:sseBeforeMessage", () => { followStream = atNewest(); });
  document.addEventListener("htmx:sseMessage", () => { if (followStream) showNewest(); });

  const swappedStory = (event) => Boolean(event.detail && event.detail.target && event.detail.target.id === "story");

  document.addEventListener("htmx:afterSwap", (event) => {
    if (!swappedStory(event)) return;
    const story = document.getElementById("story");
    // Focus stays on the command the reader used, or goes to the turn box when
    // that command is gone or disabled now, never to the page body.
    const again = commandId && document.getElementById(commandId);
    if (again && !again.disabled) again.focus({ preventScroll: true });
    else if (commandId) box().focus({ preventScroll: true });
    commandId = null;
    if (story && followOnSwap) showNewest();
  });

  // How much room is left, said from 90 % of the limit. Nothing typed or
  // pasted is cut: the server refuses a turn over the limit, and says so in view.
  function countLeft() {
    const field = box();
    const note = document.getElementById("turn-count");
    if (!field || !note) return;
    const limit = Number(field.dataset.limit);
    const used = [...field.value].length;
    const left = limit - used;
    note.hidden = !limit || used < limit * 0.9;
    note.classList.toggle("over", left < 0);
    note.textContent = left >= 0
      ? `${left.toLocaleString("en")} character${left === 1 ? "" : "s"} left`
      : `${(-left).toLocaleString("en")} character${left === -1 ? "" : "s"} over the limit of ${limit.toLocaleString("en")}: shorten it to send`;
  }
  document.addEventListener("input", (event) => { if (event.target.id === "turn-text") countLeft(); });

  document.addEventListener("turn-accepted", (event) => {
    if (event.target.id === "turn-form") { box().value = ""; restored = null; countLeft(); }
  });

  // Undo hands back the reader's words; they never overwrite something else typed since.
  document.addEventListener("turn-restored", (event) => {
    const text = (event.detail && event.detail.text) || "";
    if (!text) return;
    if (box().value.trim() === "" || box().value === restored) {
      box().value = text;
      restored = text;
      countLeft();
    }
  });
  document.addEventListener("turn-redone", () => {
    if (restored !== null && box().value === restored) box().value = "";
    restored = null;
    countLeft();
  });

  // Stop says so at once; the server ends the narration and the stream closes.
  document.addEventListener("submit", (event) => {
    if (!event.target.classList.contains("stop-form")) return;
    const working = event.target.closest(".working");
    const status = working && working.querySelector(".status-text");
    if (status) {
      status.removeAttribute("sse-swap");
      status.textContent = "Stopping…";
    }
    event.target.querySelector("button").disabled = true;
  }, true);

  // A finished narration is read out once, as a whole, not chunk by chunk:
  // its stream's end reloads the story, and the settled text is announced.
  let announce = null;
  document.addEventListener("htmx:sseMessage", (event) => {
    if (event.detail.type !== "done") return;
    const article = event.detail.elt.closest && event.detail.elt.closest(".action");
    if (article) announce = article.id;
  });
  document.addEventListener("htmx:afterSwap", (event) => {
    if (!announce || !swappedStory(event)) return;
    const prose = document.querySelector(`#${announce} .prose`);
    if (prose) document.getElementById("announcer").textContent = prose.textContent;
    announce = null;
  });

  // A stream the server refused (busy: 503; a fault: 500) is not retried by
  // the browser, and the sse extension's own retries back off to a minute,
  // so a finished narration kept its spinner until a reload. Instead the
  // story is fetched again after a few seconds, as a finished stream does:
  // a narration still in flight reconnects, a finished one settles.
  let recovering = null;
  document.addEventListener("htmx:sseError", (event) => {
    const source = event.detail && event.detail.source;
    if (!source || source.readyState !== EventSource.CLOSED || recovering) return;
    const working = event.target.querySelector && event.target.querySelector(".working");
    recovering = window.setTimeout(() => {
      recovering = null;
      if (working && document.body.contains(working)) htmx.trigger(working, "sse:done");
    }, 3000);
  });

  // The Story state panel loads when opened, and again after each story swap
  // while it is open. In code, not in hx-trigger filters: htmx would have to
  // evaluate those, and allowEval is off. `toggle` does not bubble, hence capture.
  const statePanel = () => document.getElementById("state-panel");
  document.addEventListener("toggle", (event) => {
    if (event.target === statePanel() && event.target.open) htmx.trigger(event.target, "state-refresh");
  }, true);
  document.addEventListener("htmx:afterSwap", (event) => {
    const panel = statePanel();
    if (panel && panel.open && swappedStory(event)) htmx.trigger(panel, "state-refresh");
  });

  // Context opens the inspector under its narration, and a second press closes it.
  document.addEventListener("htmx:beforeRequest", (event) => {
    const link = event.detail.elt;
    if (!link.classList || !link.classList.contains("context-link")) return;
    const open = document.getElementById(link.getAttribute("aria-controls"));
    if (open) { event.preventDefault(); open.remove(); link.focus(); }
  });

  // A reader coming back lands at the newest part of the story, above the turn box.
  document.addEventListener("DOMContentLoaded", () => {
    countLeft();
    if (location.hash) reserveTurnBox();
    else showNewest();
  });

  document.addEventListener("keydown", (event) => {
    if (event.target.id === "turn-text" && event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      htmx.trigger("#turn-form", "submit");
    }
    if (event.key === "Escape") {
      const open = document.querySelector(".play .inspector");
      if (!open) return;
      const link = document.querySelector(`[aria-controls="${open.id}"]`);
      open.remove();
      if (link) link.focus();
    }
  });

  // The inspector, once opened, takes focus so Escape and reading start there.
  document.addEventListener("htmx:afterSettle", (event) => {
    const opened = event.detail.elt && event.detail.elt.classList && event.detail.elt.classList.contains("inspector")
      ? event.detail.elt : document.querySelector(".play .inspector:not([data-seen])");
    if (opened) { opened.dataset.seen = "1"; opened.setAttribute("tabindex", "-1"); opened.focus(); }
  });
})();
