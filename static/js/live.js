// The play page following its campaign live (storyapp.views.events): when
// the story changed elsewhere (another member's turn, a narration started or
// ended, an undo), #story is fetched again, as a finished narration's stream
// does; a narration in flight is then followed by its own stream, which the
// story brings. Also who is here, and whether the page is connected.
//
// The story says which event it reflects (data-event), so a change this page
// made itself, whose answer already showed it, fetches nothing more. The turn
// box is outside #story and never touched; an action being edited in place
// holds the refetch back until it is saved or cancelled.
//
// A whisper to this page's seat changes no story: the whispers panel alone
// is fetched (storyapp.views.review.whispers_panel_view), unless the game
// master is writing the next one there.
(function () {
  "use strict";
  const live = document.getElementById("live");
  if (!live || !window.EventSource) return;
  const state = document.getElementById("live-state");
  const list = document.getElementById("live-present");
  // Told by the stream, but no change to the story.
  const QUIET = new Set(["presence"]);
  // Told by the stream, and fetched into their own panel, not the story.
  const PANELS = { whisper: refreshWhispers };
  const ROLES = { gm: "Game master", player: "Player", watcher: "Watcher" };
  const story = () => document.getElementById("story");
  const shown = () => Number((story() && story().dataset.event) || 0);
  // A narration this page follows by its own stream: that stream's end
  // fetches the story (and announces the narration), so its events need not.
  const followed = (event) => {
    const article = event.data && event.data.action && document.getElementById(`action-${event.data.action}`);
    return Boolean(article && article.hasAttribute("sse-connect"));
  };

  let last = Number(live.dataset.after || 0);
  let wanted = 0;
  let fetching = false;
  // The reader's own commands on the story (Send, Undo, a stream's end...)
  // in flight: their answer shows what they did, and a fetch beside it
  // would replace that answer and the focus play.js gave it. Each is
  // counted off by its own request's end, which is heard even when the
  // element that sent it has left the page.
  let commands = 0;
  const aimsAtStory = (event) => Boolean(event.detail && event.detail.target && event.detail.target.id === "story");
  document.addEventListener("htmx:beforeRequest", (event) => {
    if (!aimsAtStory(event) || event.detail.elt === live || !event.detail.xhr) return;
    commands += 1;
    event.detail.xhr.addEventListener("loadend", () => {
      commands = Math.max(0, commands - 1);
      window.setTimeout(refresh, 0);
    });
  });

  // One fetch of this page's at a time, none while a command of the
  // reader's is in flight; when either ends (swapped, failed, or swapped
  // into a story another request had replaced meanwhile), what is still
  // unseen is asked for again. Counting requests by their htmx events
  // stalled the page: a finished stream's reload, begun before a player's
  // action was placed, replaced the story after a fresher fetch, and the
  // end of a request whose element had left the page reached no listener.
  function refresh() {
    const section = story();
    if (!section || wanted <= shown() || fetching || commands > 0) return;
    if (section.querySelector(".editing")) return;
    fetching = true;
    const before = shown();
    // From #live, which holds no command: play.js then moves no focus, and
    // keeps the reader's scroll unless they were at the story's end.
    htmx.ajax("GET", live.dataset.play, { source: live, target: "#story", swap: "outerHTML" })
      .catch(() => null)
      .then(() => {
        fetching = false;
        // Nothing newer shown (a busy server's 503, say): a moment's pause before asking again.
        window.setTimeout(refresh, shown() > before ? 0 : 1000);
      });
  }

  function refreshWhispers() {
    const panel = document.getElementById("whispers");
    if (!panel) return;
    const draft = panel.querySelector("textarea");
    if (panel.contains(document.activeElement) || (draft && draft.value.trim())) return;
    htmx.ajax("GET", live.dataset.whispers, { source: live, target: "#whispers", swap: "outerHTML" });
  }

  // After any swap into the page (a finished stream's reload, a command's
  // answer, an edit saved or cancelled), anything it does not show is fetched.
  document.addEventListener("htmx:afterSettle", () => window.setTimeout(refresh, 0));

  function showPresent(here) {
    list.replaceChildren(...here.map((member) => {
      const item = document.createElement("li");
      item.textContent = member.seat ? `${member.name} (${member.seat})` : member.name;
      item.title = ROLES[member.role] || "";
      return item;
    }));
  }

  let source = null;
  function connect() {
    source = new EventSource(`${live.dataset.events}?after=${last}`);
    source.addEventListener("open", () => { state.textContent = "Live"; live.dataset.state = "live"; });
    source.addEventListener("change", (message) => {
      const event = JSON.parse(message.data);
      last = Math.max(last, event.id);
      if (PANELS[event.kind]) PANELS[event.kind]();
      if (QUIET.has(event.kind) || PANELS[event.kind] || followed(event)) return;
      wanted = Math.max(wanted, event.id);
      refresh();
    });
    source.addEventListener("presence", (message) => showPresent(JSON.parse(message.data)));
    source.addEventListener("error", () => {
      live.dataset.state = "offline";
      if (source.readyState === EventSource.CONNECTING) {
        state.textContent = "Reconnecting…";
        return;
      }
      // Refused (a busy server, or no longer a member): try again a little
      // later, from the last event this page has.
      state.textContent = "Offline, trying again…";
      source.close();
      window.setTimeout(connect, 5000);
    });
  }
  connect();
})();
