// Where a form's refusal shows, on every page. A refused form answers 4xx
// with the form again, its message in it (base.html's responseHandling swaps
// those in); here the message is brought to the reader: scrolled into view,
// focused, so a screen reader reads it out. A page that arrives whole with a
// refused form (no JavaScript in the request) gets the same on load.
(function () {
  "use strict";
  // A marked refusal first: a story swapped in may hold older failures too.
  const MARKED = ".refusal";
  const ANY = ".error, .errorlist, [role=alert]";

  function show(message) {
    if (!message.hasAttribute("tabindex")) message.setAttribute("tabindex", "-1");
    message.scrollIntoView({ block: "nearest" });
    message.focus({ preventScroll: true });
  }

  function firstIn(root) {
    if (!root || !root.querySelector) return null;
    if (root.matches(MARKED)) return root;
    return root.querySelector(MARKED) || (root.matches(ANY) ? root : root.querySelector(ANY));
  }

  // After settling, so it comes after the play page's own scrolling and focus.
  document.addEventListener("htmx:afterSettle", (event) => {
    const detail = event.detail || {};
    const status = detail.xhr ? detail.xhr.status : 0;
    if (status < 400 || status >= 500 || detail.refusalShown) return;
    const message = firstIn(event.target);
    if (message) { detail.refusalShown = true; show(message); }
  });

  document.addEventListener("DOMContentLoaded", () => {
    const message = document.querySelector(`form ${MARKED}, ${MARKED}, form .errorlist, form .error`);
    if (message) show(message);
  });
})();
