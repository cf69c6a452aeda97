// Keep the newest part of the story in view after a turn, and send with Ctrl/Cmd+Enter.
document.addEventListener("htmx:afterSwap", (event) => {
  if (event.target.id === "story") window.scrollTo(0, document.body.scrollHeight);
});
document.addEventListener("keydown", (event) => {
  if (event.target.id === "turn-text" && event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    htmx.trigger("#turn-form", "submit");
  }
});
