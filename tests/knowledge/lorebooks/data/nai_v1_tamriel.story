{
    "storyContainerVersion": 1,
    "metadata": {
        "storyMetadataVersion": 1,
        "id": "215228ed-d1af-43e5-8659-b2999c01b62e",
        "title": "Tamriel: The Reign of Katariah",
        "description": "Start in Whiterun.",
        "createdAt": 1624410169091
    },
    "content": {
        "storyContentVersion": 1,
        "settings": {"parameters": {"temperature": 0.8, "max_length": 40}, "trimResponses": true},
        "story": {"version": 1, "text": "You are at the Bloated Goat, the local tavern and inn."},
        "context": [
            {"text": "", "contextConfig": {"prefix": "", "suffix": "\n", "tokenBudget": 2048, "reservedTokens": 0, "budgetPriority": 800, "trimDirection": "trimBottom", "insertionType": "newline", "insertionPosition": 0}}
        ],
        "lorebook": {
            "lorebookVersion": 1,
            "entries": [
                {
                    "text": "[ Ungvid description:< name ≡ Ungvid / Jarl Ungvid>/< age ≡ 62y>/<race ≡ Nord>. Ungvid moniker:< Ruler of Winterhold>.]",
                    "contextConfig": {"prefix": "[", "suffix": "]\n", "tokenBudget": 2048, "reservedTokens": 0, "budgetPriority": 400, "trimDirection": "trimBottom", "insertionType": "newline", "insertionPosition": -5},
                    "lastUpdatedAt": 1624410170266,
                    "displayName": "Ungvid,Jarl of Winterhold,Ruler of Winterhold",
                    "keys": ["Ungvid", "Jarl of Winterhold", "Ruler of Winterhold"],
                    "searchRange": 1000,
                    "enabled": true,
                    "forceActivation": false
                },
                {
                    "text": "[ Yolanda description:< name ≡ Yolanda/ Jarl Yolanda>/<race ≡ Nord>. Yolanda moniker:< Ruler of Whiterun>.]",
                    "contextConfig": {"prefix": "[", "suffix": "]\n", "tokenBudget": 2048, "reservedTokens": 0, "budgetPriority": 400, "trimDirection": "trimBottom", "insertionType": "newline", "insertionPosition": -5},
                    "lastUpdatedAt": 1624410170266,
                    "displayName": "Yolanda,Jarl of Whiterun,Ruler of Whiterun",
                    "keys": ["Yolanda", "Jarl of Whiterun", "Ruler of Whiterun"],
                    "searchRange": 1000,
                    "enabled": true,
                    "forceActivation": false
                }
            ]
        },
        "storyContextConfig": {"prefix": "", "suffix": "", "tokenBudget": 2048, "reservedTokens": 512, "budgetPriority": 0, "trimDirection": "trimTop", "insertionType": "newline", "insertionPosition": -1}
    }
}
