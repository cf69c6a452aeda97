// The profile page's "Server's window" line after a save: the probe the save
// queued runs in a worker, so the line says "Checking…" and asks for itself
// again until the server's answer is stored (endpoints/probeline.py), with
// no reload. The server stops saying "checking" 90 s after the save.
document.addEventListener("DOMContentLoaded", () => {
  "use strict";
  const line = document.querySelector("[data-window-poll]");
  if (!line) return;
  let tries = 0;
  const ask = async () => {
    tries += 1;
    try {
      const response = await fetch(line.dataset.windowPoll, {headers: {Accept: "application/json"}, credentials: "same-origin"});
      if (response.ok) {
        const found = await response.json();
        line.textContent = found.text;
        if (!found.checking) return;
      }
    } catch (error) {
      // A dropped connection: the next try asks again.
    }
    if (tries < 120) setTimeout(ask, 1500);
  };
  setTimeout(ask, 1000);
});
